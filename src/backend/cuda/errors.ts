import { NeuronError } from "../../common/errors.ts";

export type CudaErrorCode =
  | "cuda_error"
  | "cuda_unavailable"
  | "cuda_out_of_memory"
  | "cuda_invalid_argument";

/**
 * Errors of the CUDA backend: a failed driver or cuBLAS call (`cuda_error`, with the
 * call's CUresult name), no usable driver or device (`cuda_unavailable`, with the
 * loader's reason), too little device memory (`cuda_out_of_memory`, with the numbers), or
 * operands the ops cannot take (`cuda_invalid_argument`).
 */
export class CudaError extends NeuronError {
  declare readonly code: CudaErrorCode;
  /** The CUresult (or cublasStatus_t) of the failed call, when there was one. */
  readonly result?: number;

  constructor(code: CudaErrorCode, message: string, result?: number, options?: ErrorOptions) {
    super(code, message, options);
    this.result = result;
  }
}

/** A GPU was asked for and none can be used; the message carries the reason. */
export class CudaUnavailableError extends CudaError {
  constructor(reason: string, options?: ErrorOptions) {
    super("cuda_unavailable", `CUDA is unavailable: ${reason}`, undefined, options);
  }
}

export function invalidArgument(op: string, message: string): CudaError {
  return new CudaError("cuda_invalid_argument", `${op}: ${message}`);
}

const MIB = 1024 * 1024;

/** Megabytes with one decimal, for the numbers in memory errors. */
export function mib(bytes: number): string {
  return `${(bytes / MIB).toFixed(1)} MiB`;
}
