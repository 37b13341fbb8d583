/**
 * A thin typed wrapper over the CPU kernel library: native buffers, and a `Pool` (one per
 * loaded model: its own threads and scratch) whose methods are the kernels. Operands are
 * native buffers, typed arrays or raw addresses (weights in the mmapped GGUF); sizes are
 * checked wherever the operand carries one. A pool's methods run synchronously; its op
 * list records ops to run many in one call (op_list.ts says why).
 */

import { checkStatus, CpuKernelError } from "./errors.ts";
import { type CpuSymbols, openCpuLibrary } from "./library.ts";
import { NativeBuffer, type Operand, operandPointer } from "./native_buffer.ts";
import { checkDims } from "./checks.ts";
import { ISA_LEVELS, type IsaLevel, Pool } from "./pool.ts";
import { kernelTypeName } from "./kernel_types.ts";

export { NativeBuffer, type Operand } from "./native_buffer.ts";
export { ISA_LEVELS, type IsaLevel, MATMUL_MANY_MAX, Pool } from "./pool.ts";
export {
  KV_F16,
  KV_F32,
  KV_Q4_0,
  KV_Q8_0,
  type KvLayout,
  kvLayoutBytes,
  type KvType,
  kvTypeId,
} from "./kv_layout.ts";
export { ROPE_NEOX, ROPE_NORM, type RopeAngles } from "./op_list.ts";

const FEATURE_NAMES = [
  "avx2",
  "fma",
  "f16c",
  "avx512f",
  "avx512bw",
  "avx512vl",
  "avx512dq",
  "avx512_vnni",
  "avx512_bf16",
  "avx_vnni",
  "amx_int8",
  "amx_bf16",
  "avx512_vbmi",
] as const;

export class CpuKernels {
  readonly #sym: CpuSymbols;

  constructor(path?: string) {
    this.#sym = openCpuLibrary(path).symbols;
  }

  /** CPU features the library detected, by name. */
  features(): string[] {
    const bits = this.#sym.nk_cpu_features();
    return FEATURE_NAMES.filter((_, i) => (bits & (1 << i)) !== 0);
  }

  /** The best dispatch level of this CPU. */
  bestIsa(): IsaLevel {
    return ISA_LEVELS[this.#sym.nk_best_isa()];
  }

  /** Levels this CPU runs, worst first. */
  supportedIsas(): IsaLevel[] {
    return ISA_LEVELS.slice(0, this.#sym.nk_best_isa() + 1);
  }

  /** Zeroed, 64-byte aligned native memory. */
  alloc(bytes: number): NativeBuffer {
    checkDims("alloc", { bytes });
    const p = this.#sym.nk_alloc(BigInt(bytes));
    if (p === null) throw new CpuKernelError("cpu_kernel_oom", `alloc: ${bytes} bytes unavailable`);
    const sym = this.#sym;
    return new NativeBuffer(p, bytes, (q) => sym.nk_free(q));
  }

  /**
   * Like `alloc`, on transparent huge pages where the system allows them (whole 2 MiB
   * pages: meant for large, long-lived buffers such as weight arenas).
   */
  allocHuge(bytes: number): NativeBuffer {
    checkDims("allocHuge", { bytes });
    const p = this.#sym.nk_alloc_huge(BigInt(bytes));
    if (p === null) {
      throw new CpuKernelError("cpu_kernel_oom", `allocHuge: ${bytes} bytes unavailable`);
    }
    const sym = this.#sym;
    return new NativeBuffer(p, bytes, (q) => sym.nk_free(q));
  }

  /** A pool of `threads` threads (default: one per CPU), the caller included. */
  createPool(threads = 0): Pool {
    if (!Number.isSafeInteger(threads) || threads < 0) {
      throw new CpuKernelError("cpu_kernel_invalid", `threads must be >= 0, got ${threads}`);
    }
    const p = this.#sym.nk_pool_create(threads);
    if (p === null) throw new CpuKernelError("cpu_kernel_oom", "cannot create the thread pool");
    return new Pool(this.#sym, p);
  }

  /** Bytes of one row of `cols` values of a ggml type. */
  rowBytes(type: number, cols: number): number {
    const name = kernelTypeName(type);
    const n = Number(this.#sym.nk_row_bytes(type, BigInt(cols)));
    if (name === null || n < 0) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `type ${name ?? type} with ${cols} columns is not computable here`,
      );
    }
    return n;
  }

  /** The repacked type (repacked.ts) worth repacking a ggml type into on this CPU, or
   * null when none is. */
  repackedType(type: number): number | null {
    const r = this.#sym.nk_r16_type(type);
    return r === 0 ? null : r;
  }

  /** Reference dequantization of whole rows into f32. */
  dequantizeRows(type: number, src: Operand, nRows: number, cols: number, dst: Operand): void {
    checkDims("dequantizeRows", { nRows, cols });
    const rb = this.rowBytes(type, cols);
    checkStatus(
      "dequantizeRows",
      this.#sym.nk_dequantize_rows(
        type,
        operandPointer("dequantizeRows", "src", src, rb * nRows),
        BigInt(nRows),
        BigInt(cols),
        operandPointer("dequantizeRows", "dst", dst, nRows * cols * 4),
      ),
    );
  }

  f16ToF32(src: Operand, dst: Operand, n: number): void {
    checkDims("f16ToF32", { n });
    this.#sym.nk_f16_to_f32(
      operandPointer("f16ToF32", "src", src, 2 * n),
      operandPointer("f16ToF32", "dst", dst, 4 * n),
      BigInt(n),
    );
  }

  f32ToF16(src: Operand, dst: Operand, n: number): void {
    checkDims("f32ToF16", { n });
    this.#sym.nk_f32_to_f16(
      operandPointer("f32ToF16", "src", src, 4 * n),
      operandPointer("f32ToF16", "dst", dst, 2 * n),
      BigInt(n),
    );
  }
}
