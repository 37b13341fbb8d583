/**
 * A pool of native threads (one per loaded model) and the kernels, as methods, that run on
 * it. Operands are native buffers, typed arrays or raw addresses; sizes are checked
 * wherever the operand carries one, shapes always.
 */

import { ggmlTypeInfo } from "../../gguf/mod.ts";
import { checkDims } from "./checks.ts";
import { checkStatus, CpuKernelError } from "./errors.ts";
import { checkPositions, kvCacheBytes, type KvLayout } from "./kv_layout.ts";
import type { CpuSymbols } from "./library.ts";
import { type Operand, operandPointer } from "./native_buffer.ts";

/** Matrices one matmulMany call takes (NK_MANY_MAX in the library). */
export const MATMUL_MANY_MAX = 8;

/** Dispatch levels, in the library's numbering. */
export const ISA_LEVELS = ["scalar", "avx2", "avx512"] as const;
export type IsaLevel = (typeof ISA_LEVELS)[number];

export class Pool {
  readonly #sym: CpuSymbols;
  #pool: Deno.PointerObject | null;
  readonly threads: number;

  constructor(sym: CpuSymbols, pool: Deno.PointerObject) {
    this.#sym = sym;
    this.#pool = pool;
    this.threads = sym.nk_pool_threads(pool);
  }

  get #p(): Deno.PointerObject {
    if (this.#pool === null) {
      throw new CpuKernelError("cpu_kernel_invalid", "pool already destroyed");
    }
    return this.#pool;
  }

  /** The dispatch level this pool's ops use. */
  get isa(): IsaLevel {
    return ISA_LEVELS[this.#sym.nk_pool_isa(this.#p)];
  }

  /** Forces a dispatch level (tests check each one); the CPU must support it. */
  set isa(level: IsaLevel) {
    checkStatus(`isa ${level}`, this.#sym.nk_pool_set_isa(this.#p, ISA_LEVELS.indexOf(level)));
  }

  /** Stops the threads and frees the scratch; the pool is unusable afterwards. */
  destroy(): void {
    if (this.#pool === null) return;
    this.#sym.nk_pool_destroy(this.#pool);
    this.#pool = null;
  }

  #matmulArgs(
    op: string,
    type: number,
    w: Operand,
    rows: number,
    cols: number,
    x: Operand,
    nTokens: number,
    y: Operand,
  ): [Deno.PointerObject, Deno.PointerObject, Deno.PointerObject] {
    checkDims(op, { rows, cols, nTokens });
    const info = ggmlTypeInfo(type);
    const rb = Number(this.#sym.nk_row_bytes(type, BigInt(cols)));
    if (!info || rb < 0) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: type ${info?.name ?? type} with ${cols} columns is not computable here`,
      );
    }
    return [
      operandPointer(op, "weights", w, rb * rows),
      operandPointer(op, "x", x, nTokens * cols * 4),
      operandPointer(op, "y", y, nTokens * rows * 4),
    ];
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
    if (mats.length < 1 || mats.length > MATMUL_MANY_MAX) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `matmulMany: ${mats.length} matrices (1 to ${MATMUL_MANY_MAX})`,
      );
    }
    const types = new Int32Array(mats.length);
    const rows = new BigInt64Array(mats.length);
    const ws = new BigUint64Array(mats.length), ys = new BigUint64Array(mats.length);
    let px: Deno.PointerObject | null = null;
    mats.forEach((m, i) => {
      const [pw, pxm, py] = this.#matmulArgs(
        "matmulMany",
        m.type,
        m.w,
        m.rows,
        cols,
        x,
        nTokens,
        m.y,
      );
      types[i] = m.type;
      rows[i] = BigInt(m.rows);
      ws[i] = BigInt(Deno.UnsafePointer.value(pw));
      ys[i] = BigInt(Deno.UnsafePointer.value(py));
      px = pxm;
    });
    checkStatus(
      "matmulMany",
      this.#sym.nk_matmul_many(
        this.#p,
        mats.length,
        types,
        ws,
        rows,
        BigInt(cols),
        px,
        BigInt(nTokens),
        ys,
      ),
    );
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
    const [pw, px, py] = this.#matmulArgs("matmul", type, w, rows, cols, x, nTokens, y);
    checkStatus(
      "matmul",
      this.#sym.nk_matmul(this.#p, type, pw, BigInt(rows), BigInt(cols), px, BigInt(nTokens), py),
    );
  }

  /** The reference of `matmul`: rows dequantized and dotted in double. */
  matmulRef(
    type: number,
    w: Operand,
    rows: number,
    cols: number,
    x: Operand,
    nTokens: number,
    y: Operand,
  ): void {
    const [pw, px, py] = this.#matmulArgs("matmulRef", type, w, rows, cols, x, nTokens, y);
    checkStatus(
      "matmulRef",
      this.#sym.nk_matmul_ref(
        this.#p,
        type,
        pw,
        BigInt(rows),
        BigInt(cols),
        px,
        BigInt(nTokens),
        py,
      ),
    );
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
    checkStatus(
      "getRows",
      this.#sym.nk_get_rows(
        this.#p,
        type,
        operandPointer("getRows", "table", table, rb * nRows),
        BigInt(nRows),
        BigInt(cols),
        operandPointer("getRows", "ids", ids, 4 * ids.length),
        BigInt(ids.length),
        operandPointer("getRows", "out", out, 4 * cols * ids.length),
      ),
    );
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
    checkStatus(
      "rmsnorm",
      this.#sym.nk_rmsnorm(
        this.#p,
        operandPointer("rmsnorm", "out", out, bytes),
        operandPointer("rmsnorm", "x", x, bytes),
        weight === null ? null : operandPointer("rmsnorm", "weight", weight, dim * 4),
        BigInt(nRows),
        BigInt(dim),
        eps,
      ),
    );
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
    checkStatus(
      "ropeNeox",
      this.#sym.nk_rope_neox(
        this.#p,
        operandPointer("ropeNeox", "x", x, nTokens * nHeads * headDim * 4),
        BigInt(nTokens),
        BigInt(nHeads),
        BigInt(headDim),
        operandPointer("ropeNeox", "positions", positions, 4 * nTokens),
        freqBase,
      ),
    );
  }

  /** Writes each token's K and V ([nTokens][nKvHeads][headDim] f32) at its position. */
  kvStore(
    l: KvLayout,
    kCache: Operand,
    vCache: Operand,
    blockTable: Int32Array,
    positions: Int32Array,
    nTokens: number,
    k: Operand,
    v: Operand,
  ): void {
    checkPositions("kvStore", l, blockTable, positions, nTokens);
    const cache = kvCacheBytes(l), row = nTokens * l.nKvHeads * l.headDim * 4;
    checkStatus(
      "kvStore",
      this.#sym.nk_kv_store(
        this.#p,
        operandPointer("kvStore", "kCache", kCache, cache),
        operandPointer("kvStore", "vCache", vCache, cache),
        l.type,
        BigInt(l.blockSize),
        operandPointer("kvStore", "blockTable", blockTable, 4 * blockTable.length),
        operandPointer("kvStore", "positions", positions, 4 * nTokens),
        BigInt(nTokens),
        BigInt(l.nKvHeads),
        BigInt(l.headDim),
        operandPointer("kvStore", "k", k, row),
        operandPointer("kvStore", "v", v, row),
      ),
    );
  }

  /** Causal GQA attention of q ([nTokens][nHeads][headDim]) over the sequence's cached
   * positions 0..positions[t]; out has q's shape. */
  attention(
    l: KvLayout,
    out: Operand,
    q: Operand,
    kCache: Operand,
    vCache: Operand,
    blockTable: Int32Array,
    positions: Int32Array,
    nTokens: number,
    nHeads: number,
    scale: number,
  ): void {
    checkPositions("attention", l, blockTable, positions, nTokens);
    checkDims("attention", { nHeads });
    if (nHeads % l.nKvHeads !== 0) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `attention: ${nHeads} heads over ${l.nKvHeads} kv heads`,
      );
    }
    const cache = kvCacheBytes(l), qBytes = nTokens * nHeads * l.headDim * 4;
    checkStatus(
      "attention",
      this.#sym.nk_attention(
        this.#p,
        operandPointer("attention", "out", out, qBytes),
        operandPointer("attention", "q", q, qBytes),
        operandPointer("attention", "kCache", kCache, cache),
        operandPointer("attention", "vCache", vCache, cache),
        l.type,
        BigInt(l.blockSize),
        operandPointer("attention", "blockTable", blockTable, 4 * blockTable.length),
        operandPointer("attention", "positions", positions, 4 * nTokens),
        BigInt(nTokens),
        BigInt(nHeads),
        BigInt(l.nKvHeads),
        BigInt(l.headDim),
        scale,
      ),
    );
  }

  /** out = silu(gate) * up over n values. */
  siluMul(out: Operand, gate: Operand, up: Operand, n: number): void {
    checkDims("siluMul", { n });
    checkStatus(
      "siluMul",
      this.#sym.nk_silu_mul(
        this.#p,
        operandPointer("siluMul", "out", out, 4 * n),
        operandPointer("siluMul", "gate", gate, 4 * n),
        operandPointer("siluMul", "up", up, 4 * n),
        BigInt(n),
      ),
    );
  }

  /**
   * out[r] = the index of the largest value of row r of x[rows][cols] (the first of equal
   * ones; NaN never wins; 0 for a row of NaN).
   */
  argmaxRows(x: Operand, rows: number, cols: number, out: Int32Array): void {
    checkDims("argmaxRows", { rows, cols });
    if (out.length < rows) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `argmaxRows: out holds ${out.length} < ${rows}`,
      );
    }
    checkStatus(
      "argmaxRows",
      this.#sym.nk_argmax_rows(
        this.#p,
        operandPointer("argmaxRows", "x", x, 4 * rows * cols),
        BigInt(rows),
        BigInt(cols),
        operandPointer("argmaxRows", "out", out, 4 * rows),
      ),
    );
  }

  /** out = a + b over n values. */
  add(out: Operand, a: Operand, b: Operand, n: number): void {
    checkDims("add", { n });
    checkStatus(
      "add",
      this.#sym.nk_add(
        this.#p,
        operandPointer("add", "out", out, 4 * n),
        operandPointer("add", "a", a, 4 * n),
        operandPointer("add", "b", b, 4 * n),
        BigInt(n),
      ),
    );
  }

  /** Read bandwidth in GB/s of all threads streaming a buffer of `bytes`, best of `iters`. */
  bandwidth(bytes: number, iters = 5): number {
    checkDims("bandwidth", { bytes, iters });
    const gbs = this.#sym.nk_bandwidth(this.#p, BigInt(bytes), iters);
    if (gbs < 0) checkStatus("bandwidth", gbs);
    return gbs;
  }
}
