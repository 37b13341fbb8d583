/**
 * Ops recorded for one later foreign call (nk_run_ops, kernels/cpu/oplist.c): a decode
 * step of Qwen3-0.6B is ~420 ops, and one synchronous FFI call per op cost 5-7 µs of
 * JavaScript each (argument conversion, the call) while the pool's workers waited, ~10% of
 * a token; recorded, an op costs under 1 µs. Arguments are checked when an op is recorded,
 * with the errors the immediate calls give; what only the kernels can refuse surfaces from
 * `flush()`, named after the op that failed.
 */

import { checkDims, matmulOperands } from "./checks.ts";
import { checkStatus, CpuKernelError } from "./errors.ts";
import { checkSequences, kvCacheBytes, type KvLayout, type KvSequence } from "./kv_layout.ts";
import type { CpuSymbols } from "./library.ts";
import type { StepInterrupt } from "../backend.ts";
import { type Operand, operandPointer } from "./native_buffer.ts";

/** nk_run_ops stopped by its interrupt word. */
const NK_EINTERRUPTED = -4;

/** Matrices one matmulMany call takes (NK_MANY_MAX in the library). */
export const MATMUL_MANY_MAX = 8;

/** Op codes of oplist.c. */
const OP_GET_ROWS = 1, OP_RMSNORM = 2, OP_MATMUL = 3, OP_ROPE = 4, OP_KV_STORE = 5;
const OP_ATTENTION = 6, OP_SILU_MUL = 7, OP_ADD = 8;

function address(p: Deno.PointerObject): number {
  return Number(Deno.UnsafePointer.value(p));
}

export class OpList {
  readonly #sym: CpuSymbols;
  readonly #pool: () => Deno.PointerObject;
  #words = new Float64Array(8192);
  #nWords = 0;
  #ints = new Int32Array(4096);
  #nInts = 0;
  /** Each recorded op's name, for the error of one that fails. */
  #names: string[] = [];
  /** Typed-array operands, kept alive (their memory in place) until the list runs. */
  #keep: ArrayBufferView[] = [];
  readonly #failed = new Int32Array(1);
  /** nk_row_bytes by "type:cols": a foreign call saved per recorded product. */
  readonly #rowBytes = new Map<string, number>();

  /** `pool` returns the native pool, or throws once it is gone. */
  constructor(sym: CpuSymbols, pool: () => Deno.PointerObject) {
    this.#sym = sym;
    this.#pool = pool;
  }

  /** Bytes of a row of `cols` values of `type`; negative when not computable. */
  rowBytes(type: number, cols: number): number {
    const key = `${type}:${cols}`;
    let rb = this.#rowBytes.get(key);
    if (rb === undefined) {
      rb = Number(this.#sym.nk_row_bytes(type, BigInt(cols)));
      this.#rowBytes.set(key, rb);
    }
    return rb;
  }

  /** Ops recorded and not yet run. */
  get pending(): number {
    return this.#names.length;
  }

  /**
   * Runs the recorded ops, in order, and empties the list (also when one fails). With
   * `interrupt`, stops between two ops once it fires and returns false: the ops after that
   * point never run.
   */
  flush(interrupt?: StepInterrupt): boolean {
    if (this.#names.length === 0) return true;
    const names = this.#names;
    let rc: number;
    this.#failed[0] = -1;
    try {
      rc = this.#sym.nk_run_ops(
        this.#pool(),
        this.#words,
        BigInt(this.#nWords),
        this.#ints,
        this.#failed,
        interrupt?.word ?? null,
        interrupt?.seen ?? 0,
      );
    } finally {
      this.discard();
    }
    if (rc === NK_EINTERRUPTED) return false;
    checkStatus(names[this.#failed[0]] ?? "runOps", rc);
    return true;
  }

  /** Forgets the recorded ops without running them. */
  discard(): void {
    this.#nWords = 0;
    this.#nInts = 0;
    this.#names = [];
    this.#keep = [];
  }

  #push(name: string, code: number, args: number[]): void {
    const end = this.#nWords + 2 + args.length;
    if (end > this.#words.length) {
      const grown = new Float64Array(2 * end);
      grown.set(this.#words.subarray(0, this.#nWords));
      this.#words = grown;
    }
    const w = this.#words, at = this.#nWords;
    w[at] = code;
    w[at + 1] = 2 + args.length;
    for (let i = 0; i < args.length; i++) w[at + 2 + i] = args[i];
    this.#nWords = end;
    this.#names.push(name);
  }

  #addr(op: string, name: string, operand: Operand, bytes: number): number {
    const p = operandPointer(op, name, operand, bytes);
    if (ArrayBuffer.isView(operand)) this.#keep.push(operand);
    return address(p);
  }

  /** Room for n more integers in the list; returns their offset there. */
  #reserveInts(n: number): number {
    if (this.#nInts + n > this.#ints.length) {
      const grown = new Int32Array(2 * (this.#nInts + n));
      grown.set(this.#ints.subarray(0, this.#nInts));
      this.#ints = grown;
    }
    const at = this.#nInts;
    this.#nInts = at + n;
    return at;
  }

  /** Copies the first n values of `a` into the list; returns their offset there. */
  #copyInts(a: Int32Array, n: number): number {
    const at = this.#reserveInts(n);
    this.#ints.set(n === a.length ? a : a.subarray(0, n), at);
    return at;
  }

  /** out[i] = row ids[i] of a [nRows][cols] table of `type`, as f32 (embedding lookup). */
  getRows(
    type: number,
    table: Operand,
    nRows: number,
    cols: number,
    ids: Int32Array,
    out: Operand,
  ): void {
    checkDims("getRows", { nRows, cols });
    const rb = Number(this.#sym.nk_row_bytes(type, BigInt(cols)));
    if (rb < 0) {
      throw new CpuKernelError("cpu_kernel_invalid", `getRows: bad type ${type} / cols ${cols}`);
    }
    for (const id of ids) {
      if (id < 0 || id >= nRows) {
        throw new CpuKernelError("cpu_kernel_invalid", `getRows: id ${id} outside [0, ${nRows})`);
      }
    }
    if (ids.length === 0) return;
    const pTable = this.#addr("getRows", "table", table, rb * nRows);
    const pOut = this.#addr("getRows", "out", out, 4 * cols * ids.length);
    const at = this.#copyInts(ids, ids.length);
    this.#push("getRows", OP_GET_ROWS, [type, pTable, nRows, cols, at, ids.length, pOut]);
  }

  /** out = x / rms(x) * weight, per row of `dim`; weight may be null, out may be x. */
  rmsnorm(
    out: Operand,
    x: Operand,
    weight: Operand | null,
    nRows: number,
    dim: number,
    eps: number,
  ): void {
    checkDims("rmsnorm", { nRows, dim });
    const bytes = nRows * dim * 4;
    this.#push("rmsnorm", OP_RMSNORM, [
      this.#addr("rmsnorm", "out", out, bytes),
      this.#addr("rmsnorm", "x", x, bytes),
      weight === null ? 0 : this.#addr("rmsnorm", "weight", weight, dim * 4),
      nRows,
      dim,
      eps,
    ]);
  }

  /**
   * ys[m][t][r] = sum_c W_m[r][c] x[t][c] for up to 8 matrices of width `cols` that share
   * x: one quantization of x and one pass of the pool over all their rows.
   */
  matmulMany(
    mats: ReadonlyArray<{ type: number; w: Operand; rows: number; y: Operand }>,
    cols: number,
    x: Operand,
    nTokens: number,
  ): void {
    this.#matmul("matmulMany", mats, cols, x, nTokens);
  }

  /** y[t][r] = sum_c W[r][c] x[t][c], W a ggml tensor of `type` read in place. */
  matmul(
    type: number,
    w: Operand,
    rows: number,
    cols: number,
    x: Operand,
    nTokens: number,
    y: Operand,
  ): void {
    this.#matmul("matmul", [{ type, w, rows, y }], cols, x, nTokens);
  }

  #matmul(
    op: string,
    mats: ReadonlyArray<{ type: number; w: Operand; rows: number; y: Operand }>,
    cols: number,
    x: Operand,
    nTokens: number,
  ): void {
    if (mats.length < 1 || mats.length > MATMUL_MANY_MAX) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${mats.length} matrices (1 to ${MATMUL_MANY_MAX})`,
      );
    }
    const args = [mats.length, cols, 0, nTokens];
    for (const m of mats) {
      const [pw, px, py] = matmulOperands(
        (t, c) => this.rowBytes(t, c),
        op,
        m.type,
        m.w,
        m.rows,
        cols,
        x,
        nTokens,
        m.y,
      );
      args[2] = address(px);
      args.push(m.type, address(pw), m.rows, address(py));
      for (const o of [m.w, m.y]) if (ArrayBuffer.isView(o)) this.#keep.push(o);
    }
    if (ArrayBuffer.isView(x)) this.#keep.push(x);
    this.#push(op, OP_MATMUL, args);
  }

  /** NeoX RoPE in place on x[nTokens][nHeads][headDim], token t at positions[t]. */
  ropeNeox(
    x: Operand,
    nTokens: number,
    nHeads: number,
    headDim: number,
    positions: Int32Array,
    freqBase: number,
  ): void {
    checkDims("ropeNeox", { nTokens, nHeads, headDim });
    if (positions.length < nTokens) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `ropeNeox: ${positions.length} positions for ${nTokens} tokens`,
      );
    }
    const px = this.#addr("ropeNeox", "x", x, nTokens * nHeads * headDim * 4);
    const at = this.#copyInts(positions, nTokens);
    this.#push("ropeNeox", OP_ROPE, [px, nTokens, nHeads, headDim, at, freqBase]);
  }

  /** Writes each row's k and v ([rows][nKvHeads][headDim]) at its position's cache slot. */
  kvStore(
    l: KvLayout,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
    k: Operand,
    v: Operand,
  ): void {
    const [rows, pk, pv] = this.#caches("kvStore", l, kCache, vCache, sequences, positions);
    const bytes = rows * l.nKvHeads * l.headDim * 4;
    const pkr = this.#addr("kvStore", "k", k, bytes), pvr = this.#addr("kvStore", "v", v, bytes);
    this.#push("kvStore", OP_KV_STORE, [
      pk,
      pv,
      l.type,
      l.blockSize,
      ...this.#copySequences(sequences, positions, rows),
      l.nKvHeads,
      l.headDim,
      pkr,
      pvr,
    ]);
  }

  /** Causal GQA attention of q ([rows][nHeads][headDim]): each row over its sequence's
   * cached positions 0..positions[row]; out has q's shape. */
  attention(
    l: KvLayout,
    out: Operand,
    q: Operand,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
    nHeads: number,
    scale: number,
  ): void {
    checkDims("attention", { nHeads });
    if (nHeads % l.nKvHeads !== 0) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `attention: ${nHeads} heads over ${l.nKvHeads} kv heads`,
      );
    }
    const [rows, pk, pv] = this.#caches("attention", l, kCache, vCache, sequences, positions);
    const qBytes = rows * nHeads * l.headDim * 4;
    const po = this.#addr("attention", "out", out, qBytes);
    const pq = this.#addr("attention", "q", q, qBytes);
    this.#push("attention", OP_ATTENTION, [
      po,
      pq,
      pk,
      pv,
      l.type,
      l.blockSize,
      ...this.#copySequences(sequences, positions, rows),
      nHeads,
      l.nKvHeads,
      l.headDim,
      scale,
    ]);
  }

  /** The rows the sequences span and the addresses of both caches, all checked. */
  #caches(
    op: string,
    l: KvLayout,
    kCache: Operand,
    vCache: Operand,
    sequences: readonly KvSequence[],
    positions: Int32Array,
  ): [number, number, number] {
    const rows = checkSequences(op, l, sequences, positions);
    const bytes = kvCacheBytes(l);
    return [rows, this.#addr(op, "kCache", kCache, bytes), this.#addr(op, "vCache", vCache, bytes)];
  }

  /** The sequence count, then the (row_start, row_count, table_len) triples, the tables
   * and the positions as offsets into the copied integers. */
  #copySequences(
    sequences: readonly KvSequence[],
    positions: Int32Array,
    rows: number,
  ): [number, number, number, number] {
    const seqs = this.#reserveInts(3 * sequences.length);
    sequences.forEach((s, i) => {
      this.#ints[seqs + 3 * i] = s.rowStart;
      this.#ints[seqs + 3 * i + 1] = s.rowCount;
      this.#ints[seqs + 3 * i + 2] = s.blockTable.length;
    });
    const tables = this.#nInts;
    for (const s of sequences) this.#copyInts(s.blockTable, s.blockTable.length);
    return [sequences.length, seqs, tables, this.#copyInts(positions, rows)];
  }

  /** out = silu(gate) * up over n values. */
  siluMul(out: Operand, gate: Operand, up: Operand, n: number): void {
    this.#elementwise("siluMul", OP_SILU_MUL, out, gate, up, n, ["out", "gate", "up"]);
  }

  /** out = a + b over n values. */
  add(out: Operand, a: Operand, b: Operand, n: number): void {
    this.#elementwise("add", OP_ADD, out, a, b, n, ["out", "a", "b"]);
  }

  #elementwise(
    op: string,
    code: number,
    out: Operand,
    a: Operand,
    b: Operand,
    n: number,
    names: [string, string, string],
  ): void {
    checkDims(op, { n });
    this.#push(op, code, [
      this.#addr(op, names[0], out, 4 * n),
      this.#addr(op, names[1], a, 4 * n),
      this.#addr(op, names[2], b, 4 * n),
      n,
    ]);
  }
}
