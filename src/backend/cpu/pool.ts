/**
 * A pool of native threads (one per loaded model) and the kernels, as methods, that run on
 * it at once; its `queue` records the same ops for a later single run. Operands are native
 * buffers, typed arrays or raw addresses; sizes are checked wherever the operand carries
 * one, shapes always.
 */

import { checkDims } from "./checks.ts";
import { checkStatus, CpuKernelError } from "./errors.ts";
import { type CpuSymbols, EXP_TABLE_LENGTH, NK_SAMPLE_PARAMS } from "./library.ts";
import { type NativeBuffer, type Operand, operandPointer } from "./native_buffer.ts";
import { matmulOperands } from "./checks.ts";
import { OpList } from "./op_list.ts";

export { MATMUL_MANY_MAX } from "./op_list.ts";

/** Dispatch levels, in the library's numbering. */
export const ISA_LEVELS = ["scalar", "avx2", "avx512", "avx512vbmi"] as const;
export type IsaLevel = (typeof ISA_LEVELS)[number];

/** How the bandwidth probe's passes read memory, in the library's numbering (NK_READ_*). */
export const READ_PATTERNS = ["plain", "stream", "prefetch", "nt"] as const;
export type ReadPattern = (typeof READ_PATTERNS)[number];

export class Pool {
  readonly #sym: CpuSymbols;
  #pool: Deno.PointerObject | null;
  readonly threads: number;
  readonly #queue: OpList;

  constructor(sym: CpuSymbols, pool: Deno.PointerObject) {
    this.#sym = sym;
    this.#pool = pool;
    this.threads = sym.nk_pool_threads(pool);
    this.#queue = new OpList(sym, () => this.#p);
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

  /** Says that the weights matmuls read sit on small pages (in place in a file mapping),
   * so the kernels prefetch further ahead, whole pages included; off for huge pages. */
  set pagePrefetch(on: boolean) {
    this.#sym.nk_pool_set_page_prefetch(this.#p, on ? 1 : 0);
  }

  /** Stops the threads and frees the scratch; the pool is unusable afterwards. */
  destroy(): void {
    if (this.#pool === null) return;
    // Nothing can read what the recorded ops would write once the pool is gone.
    this.#queue.discard();
    this.#sym.nk_pool_destroy(this.#pool);
    this.#pool = null;
  }

  /**
   * The op list of this pool: ops recorded there run at its next `flush()`, or before any
   * immediate op of this pool. CpuBackend records a whole forward pass in it.
   */
  get queue(): OpList {
    return this.#queue;
  }

  /** Runs one op now, after whatever the queue holds. */
  #now(record: (q: OpList) => void): void {
    record(this.#queue);
    this.#queue.flush();
  }

  /** Immediate `OpList.matmulMany`. */
  matmulMany(...a: Parameters<OpList["matmulMany"]>): void {
    this.#now((q) => q.matmulMany(...a));
  }

  /** Immediate `OpList.matmul`. */
  matmul(...a: Parameters<OpList["matmul"]>): void {
    this.#now((q) => q.matmul(...a));
  }

  /** Writes the rows x cols matrix `src` of ggml `type` to `dst` in the layout of
   * `kernels.repackedType(type)` (repacked.ts), which then goes to the matrix ops under
   * that type. */
  repack(type: number, src: Operand, rows: number, cols: number, dst: Operand): void {
    checkDims("repack", { rows, cols });
    const repacked = this.#sym.nk_r16_type(type);
    if (repacked === 0) {
      throw new CpuKernelError("cpu_kernel_invalid", `repack: type ${type} is not repacked here`);
    }
    const bytes = rows * this.#queue.rowBytes(type, cols);
    this.#queue.flush();
    checkStatus(
      "repack",
      this.#sym.nk_repack(
        this.#p,
        type,
        operandPointer("repack", "src", src, bytes),
        BigInt(rows),
        BigInt(cols),
        operandPointer("repack", "dst", dst, rows * this.#queue.rowBytes(repacked, cols)),
      ),
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
    const [pw, px, py] = matmulOperands(
      (t, c) => this.#queue.rowBytes(t, c),
      "matmulRef",
      type,
      w,
      rows,
      cols,
      x,
      nTokens,
      y,
    );
    this.#queue.flush();
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

  /** Immediate `OpList.moeRoute`. */
  moeRoute(...a: Parameters<OpList["moeRoute"]>): void {
    this.#now((q) => q.moeRoute(...a));
  }

  /** Immediate `OpList.matmulExperts`. */
  matmulExperts(...a: Parameters<OpList["matmulExperts"]>): void {
    this.#now((q) => q.matmulExperts(...a));
  }

  /** Immediate `OpList.moeCombine`. */
  moeCombine(...a: Parameters<OpList["moeCombine"]>): void {
    this.#now((q) => q.moeCombine(...a));
  }

  /** The reference of `matmulExperts` for one stack: nk_matmul_ref on every row. */
  matmulExpertsRef(
    m: { type: number; w: Operand; stride: number; rows: number; y: Operand },
    nExperts: number,
    cols: number,
    x: Operand,
    xRows: number,
    ids: Operand,
    nTokens: number,
    k: number,
  ): void {
    const op = "matmulExpertsRef";
    checkDims(op, { nExperts, cols, nTokens, k, rows: m.rows });
    const rb = this.#queue.rowBytes(m.type, cols);
    if (rb < 0) throw new CpuKernelError("cpu_kernel_invalid", `${op}: type ${m.type}`);
    this.#queue.flush();
    checkStatus(
      op,
      this.#sym.nk_matmul_experts_ref(
        this.#p,
        m.type,
        operandPointer(op, "weights", m.w, (nExperts - 1) * m.stride + rb * m.rows),
        BigInt(m.stride),
        BigInt(m.rows),
        BigInt(nExperts),
        BigInt(cols),
        operandPointer(op, "x", x, 4 * xRows * cols),
        BigInt(xRows),
        operandPointer(op, "ids", ids, 4 * nTokens * k),
        BigInt(nTokens),
        BigInt(k),
        operandPointer(op, "y", m.y, 4 * nTokens * k * m.rows),
      ),
    );
  }

  /** Immediate `OpList.getRows`. */
  getRows(...a: Parameters<OpList["getRows"]>): void {
    this.#now((q) => q.getRows(...a));
  }

  /** Immediate `OpList.rmsnorm`. */
  rmsnorm(...a: Parameters<OpList["rmsnorm"]>): void {
    this.#now((q) => q.rmsnorm(...a));
  }

  /** Immediate `OpList.rope`. */
  rope(...a: Parameters<OpList["rope"]>): void {
    this.#now((q) => q.rope(...a));
  }

  /** Immediate `OpList.kvStore`. */
  kvStore(...a: Parameters<OpList["kvStore"]>): void {
    this.#now((q) => q.kvStore(...a));
  }

  /** Immediate `OpList.attention`. */
  attention(...a: Parameters<OpList["attention"]>): void {
    this.#now((q) => q.attention(...a));
  }

  /** Immediate `OpList.siluMul`. */
  siluMul(...a: Parameters<OpList["siluMul"]>): void {
    this.#now((q) => q.siluMul(...a));
  }

  /** Immediate `OpList.argmaxRows`. */
  argmaxRows(...a: Parameters<OpList["argmaxRows"]>): void {
    this.#now((q) => q.argmaxRows(...a));
  }

  /** The plain scan `argmaxRows` is checked against (nk_argmax_rows_masked_ref), unqueued. */
  argmaxRowsRef(
    x: Float32Array,
    rows: number,
    cols: number,
    out: Int32Array,
    masks: readonly (Uint32Array | null)[],
  ): void {
    const op = "argmaxRowsRef";
    checkDims(op, { rows, cols });
    if (masks.length !== rows) {
      throw new CpuKernelError("cpu_kernel_invalid", `${op}: ${masks.length} masks, ${rows} rows`);
    }
    const words = Math.ceil(cols / 32);
    const at = BigUint64Array.from(
      masks,
      (m, r) =>
        m === null ? 0n : Deno.UnsafePointer.value(operandPointer(op, `mask ${r}`, m, 4 * words)),
    );
    checkStatus(
      op,
      this.#sym.nk_argmax_rows_masked_ref(
        operandPointer(op, "x", x, 4 * rows * cols),
        BigInt(rows),
        BigInt(cols),
        at,
        operandPointer(op, "out", out, 4 * rows),
      ),
    );
  }

  /** Immediate `OpList.add`. */
  add(...a: Parameters<OpList["add"]>): void {
    this.#now((q) => q.add(...a));
  }

  /** Immediate `OpList.geluMul`. */
  geluMul(...a: Parameters<OpList["geluMul"]>): void {
    this.#now((q) => q.geluMul(...a));
  }

  /** Immediate `OpList.addBias`. */
  addBias(...a: Parameters<OpList["addBias"]>): void {
    this.#now((q) => q.addBias(...a));
  }

  /** Immediate `OpList.scale`. */
  scale(...a: Parameters<OpList["scale"]>): void {
    this.#now((q) => q.scale(...a));
  }

  /**
   * nk_sample_draw of the rows `which` of `rows` (each `width` values), row i's draw with
   * params[i * NK_SAMPLE_PARAMS, ...] and the exp table `table`, the draws spread over the
   * threads: each row's token, -1 where a row has no candidate.
   */
  drawRows(
    rows: Float32Array,
    width: number,
    which: Int32Array,
    params: Float64Array,
    table: Float64Array,
  ): Int32Array {
    checkDims("drawRows", { width, rows: which.length });
    if (params.length < which.length * NK_SAMPLE_PARAMS || table.length < EXP_TABLE_LENGTH) {
      throw new CpuKernelError("cpu_kernel_invalid", "drawRows: params or table too short");
    }
    this.#queue.flush();
    const out = new Int32Array(which.length);
    const status = this.#sym.nk_sample_draw_rows(
      this.#p,
      rows,
      BigInt(width),
      BigInt(Math.floor(rows.length / width)),
      which,
      BigInt(which.length),
      params,
      table,
      out,
    );
    checkStatus("drawRows", status);
    return out;
  }

  /** Backs every page of `buffer` (an allocHuge one) with memory now, all threads at once:
   * a KV cache written on first touch had the kernel zero its huge pages in the middle of
   * decode steps (16 streams of qwen3-0.6b: 340-385 tok/s on a fresh pool, 419-441 on a
   * touched one). Throws cpu_kernel_oom when the system cannot back it. */
  prefault(buffer: NativeBuffer): void {
    checkStatus(
      "prefault",
      this.#sym.nk_prefault(this.#p, buffer.pointer, BigInt(buffer.byteLength)),
    );
  }

  /** Read bandwidth in GB/s of all threads streaming a buffer of `bytes`, best of `iters`. */
  bandwidth(bytes: number, iters = 5): number {
    checkDims("bandwidth", { bytes, iters });
    this.#queue.flush();
    const gbs = this.#sym.nk_bandwidth(this.#p, BigInt(bytes), iters);
    if (gbs < 0) checkStatus("bandwidth", gbs);
    return gbs;
  }

  /** The wrapping sum of `data`'s 64-bit words as the bandwidth probe reads them in
   * `pattern` (kernels/cpu/bandwidth.c); 8-byte aligned, a whole number of words. */
  readChecksum(data: Uint8Array, pattern: ReadPattern): bigint {
    const sum = new BigUint64Array(1);
    const status = this.#sym.nk_read_checksum(
      this.#p,
      data,
      BigInt(data.byteLength),
      READ_PATTERNS.indexOf(pattern),
      sum,
    );
    checkStatus("readChecksum", status);
    return sum[0];
  }
}
