/** Backends: the device-specific implementations of the model ops, and their selection. */

import { log } from "../common/log.ts";
import type { Backend } from "./backend.ts";
import { CpuBackend } from "./cpu/cpu_backend.ts";
import { createCudaBackend, type CudaBackendOptions, CudaUnavailableError } from "./cuda/mod.ts";
import { ReferenceBackend } from "./reference/reference_backend.ts";

export type * from "./backend.ts";

export type DeviceChoice = "auto" | "cpu" | "cuda" | "reference";

export { CudaUnavailableError };

export interface BackendOptions {
  /** CPU threads (0 = all cores). */
  threads: number;
  /** CPU: read weights in place from the mmapped file (default true; false copies them). */
  mmap?: boolean;
  /** CPU: Q8_0, Q4_K and Q6_K matrices repacked at load for few-row products (default true). */
  repack?: boolean;
  /** CUDA libraries and device ([cuda] of neuron.toml); defaults search the usual places. */
  cuda?: CudaBackendOptions;
}

/**
 * Builds the backend for `device`. `auto` takes the GPU when one can be used and the CPU
 * otherwise, saying why; `cuda` never falls back.
 */
export function createBackend(device: DeviceChoice, options: BackendOptions): Backend {
  switch (device) {
    case "reference":
      return new ReferenceBackend();
    case "cpu":
      return new CpuBackend({
        threads: options.threads,
        mmap: options.mmap,
        repack: options.repack,
      });
    case "cuda":
      return createCudaBackend(options.cuda);
    case "auto":
      try {
        return createCudaBackend(options.cuda);
      } catch (err) {
        if (!(err instanceof CudaUnavailableError)) throw err;
        log.info("device auto: using the CPU", { reason: err.message });
        return new CpuBackend({
          threads: options.threads,
          mmap: options.mmap,
          repack: options.repack,
        });
      }
  }
}
