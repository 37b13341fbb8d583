/**
 * cuBLAS for prefill: one GEMM entry point, f16 x f16 -> f32 with f32 accumulation
 * (CUBLAS_COMPUTE_32F), on the backend's stream. Optional: without libcublas the backend
 * computes prefill with its mat-vec kernels, a few tokens at a time.
 */

import { CudaError } from "./errors.ts";
import { openLibrary } from "./libraries.ts";

const SYMBOLS = {
  cublasCreate_v2: { parameters: ["buffer"], result: "i32" },
  cublasDestroy_v2: { parameters: ["pointer"], result: "i32" },
  cublasSetStream_v2: { parameters: ["pointer", "pointer"], result: "i32" },
  cublasGemmEx: {
    parameters: [
      "pointer", // handle
      "i32", // transa
      "i32", // transb
      "i32", // m
      "i32", // n
      "i32", // k
      "buffer", // alpha
      "u64", // A
      "i32", // Atype
      "i32", // lda
      "u64", // B
      "i32", // Btype
      "i32", // ldb
      "buffer", // beta
      "u64", // C
      "i32", // Ctype
      "i32", // ldc
      "i32", // computeType
      "i32", // algo
    ],
    result: "i32",
  },
} as const;

const STATUS: Record<number, string> = {
  1: "CUBLAS_STATUS_NOT_INITIALIZED",
  3: "CUBLAS_STATUS_ALLOC_FAILED",
  7: "CUBLAS_STATUS_INVALID_VALUE",
  8: "CUBLAS_STATUS_ARCH_MISMATCH",
  11: "CUBLAS_STATUS_MAPPING_ERROR",
  13: "CUBLAS_STATUS_EXECUTION_FAILED",
  14: "CUBLAS_STATUS_INTERNAL_ERROR",
  15: "CUBLAS_STATUS_NOT_SUPPORTED",
  16: "CUBLAS_STATUS_LICENSE_ERROR",
};

const CUBLAS_OP_N = 0;
const CUBLAS_OP_T = 1;
const CUDA_R_32F = 0;
const CUDA_R_16F = 2;
const CUBLAS_COMPUTE_32F = 68;
const CUBLAS_GEMM_DEFAULT = -1;

function check(call: string, status: number): void {
  if (status !== 0) {
    throw new CudaError(
      "cuda_error",
      `${call} failed: ${STATUS[status] ?? "cublasStatus"} (${status})`,
      status,
    );
  }
}

export class Cublas {
  readonly path: string;
  readonly #lib: Deno.DynamicLibrary<typeof SYMBOLS>;
  readonly #handle: Deno.PointerValue;
  readonly #one = new Float32Array([1]);
  readonly #zero = new Float32Array([0]);

  private constructor(
    lib: Deno.DynamicLibrary<typeof SYMBOLS>,
    path: string,
    handle: Deno.PointerValue,
  ) {
    this.#lib = lib;
    this.path = path;
    this.#handle = handle;
  }

  /** A handle bound to `stream` (the current context's); cuda_unavailable when absent. */
  static open(libcublas: string, stream: Deno.PointerValue): Cublas {
    const { lib, path } = openLibrary("libcublas", libcublas, SYMBOLS);
    const out = new BigUint64Array(1);
    const rc = lib.symbols.cublasCreate_v2(out);
    if (rc !== 0) {
      lib.close();
      check("cublasCreate_v2", rc);
    }
    const handle = Deno.UnsafePointer.create(out[0]);
    const cublas = new Cublas(lib, path, handle);
    try {
      check("cublasSetStream_v2", lib.symbols.cublasSetStream_v2(handle, stream));
    } catch (err) {
      cublas.close();
      throw err;
    }
    return cublas;
  }

  /**
   * Row-major out[n][m] (ld ldc) = x[n][k] · W[m][k]ᵀ with W and x f16 on the device:
   * in cuBLAS's column-major terms C (m x n) = Aᵀ B with A = W (k x m, lda = k).
   */
  gemmF16(
    m: number,
    n: number,
    k: number,
    w: number,
    lda: number,
    x: number,
    ldb: number,
    out: number,
    ldc: number,
  ): void {
    check(
      "cublasGemmEx",
      this.#lib.symbols.cublasGemmEx(
        this.#handle,
        CUBLAS_OP_T,
        CUBLAS_OP_N,
        m,
        n,
        k,
        this.#one,
        BigInt(w),
        CUDA_R_16F,
        lda,
        BigInt(x),
        CUDA_R_16F,
        ldb,
        this.#zero,
        BigInt(out),
        CUDA_R_32F,
        ldc,
        CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT,
      ),
    );
  }

  close(): void {
    try {
      check("cublasDestroy_v2", this.#lib.symbols.cublasDestroy_v2(this.#handle));
    } finally {
      this.#lib.close();
    }
  }
}
