/**
 * A pool of native threads (one per loaded model) and the kernels, as methods, that run on
 * it. Operands are native buffers, typed arrays or raw addresses; sizes are checked
 * wherever the operand carries one, shapes always.
 */

import { ggmlTypeInfo } from "../../gguf/mod.ts";
import { checkStatus, CpuKernelError } from "./errors.ts";
import type { CpuSymbols } from "./library.ts";
import { type Operand, operandPointer } from "./native_buffer.ts";

/** Dispatch levels, in the library's numbering. */
export const ISA_LEVELS = ["scalar", "avx2", "avx512"] as const;
export type IsaLevel = (typeof ISA_LEVELS)[number];

/** KV cache element types (ggml ids). */
export const KV_F32 = 0;
export const KV_F16 = 1;
export type KvType = typeof KV_F32 | typeof KV_F16;

/** The paged KV cache of one layer: K and V are [nBlocks][blockSize][nKvHeads][headDim]. */
export interface KvLayout {
  type: KvType;
  nBlocks: number;
  blockSize: number;
  nKvHeads: number;
  headDim: number;
}

/** Bytes of one of K or V for a layer with this layout. */
export function kvCacheBytes(l: KvLayout): number {
  return l.nBlocks * l.blockSize * l.nKvHeads * l.headDim * (l.type === KV_F16 ? 2 : 4);
}

export function checkDims(op: string, dims: Record<string, number>, allowZero = false): void {
  for (const [name, v] of Object.entries(dims)) {
    if (!Number.isSafeInteger(v) || v < 0 || (!allowZero && v === 0)) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${name} must be a positive integer, got ${v}`,
      );
    }
  }
}

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

  #checkPositions(
    op: string,
    l: KvLayout,
    blockTable: Int32Array,
    positions: Int32Array,
    nTokens: number,
  ): void {
    checkDims(op, {
      nTokens,
      nBlocks: l.nBlocks,
      blockSize: l.blockSize,
      nKvHeads: l.nKvHeads,
      headDim: l.headDim,
    });
    if (positions.length < nTokens) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: ${positions.length} positions for ${nTokens} tokens`,
      );
    }
    for (let t = 0; t < nTokens; t++) {
      const p = positions[t];
      const b = Math.floor(p / l.blockSize);
      if (p < 0 || b >= blockTable.length) {
        throw new CpuKernelError(
          "cpu_kernel_invalid",
          `${op}: position ${p} outside the block table`,
        );
      }
    }
    for (const b of blockTable) {
      if (b < 0 || b >= l.nBlocks) {
        throw new CpuKernelError(
          "cpu_kernel_invalid",
          `${op}: block ${b} outside [0, ${l.nBlocks})`,
        );
      }
    }
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
    this.#checkPositions("kvStore", l, blockTable, positions, nTokens);
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
    this.#checkPositions("attention", l, blockTable, positions, nTokens);
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
