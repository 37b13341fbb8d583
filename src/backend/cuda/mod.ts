/**
 * The CUDA backend: libcuda through Deno.dlopen, our own kernels precompiled to PTX and
 * cubins per GPU flavour, cuBLAS for prefill, CUDA graphs for repeated steps. Create it on
 * the thread that will use it (the model's engine Worker): the device's primary context is
 * made current there.
 */

import { type CudaBackendOptions, CudaContext } from "./context.ts";
import { CudaBackend } from "./cuda_backend.ts";

export { CudaBackend, type CudaBackendInfo } from "./cuda_backend.ts";
export { HEADROOM_BYTES } from "./loading.ts";
export type { CudaBackendOptions } from "./context.ts";
export { CudaError, CudaUnavailableError } from "./errors.ts";
export type { MemoryUsage } from "./memory.ts";
export type { RunnerStats } from "./runner.ts";
export { cuResultName } from "./cu_result.ts";
export { FLAVOURS, selectFlavour } from "./flavour.ts";

/**
 * A CUDA backend on `options.device` (default 0). Throws CudaUnavailableError
 * (`cuda_unavailable`) with the reason when the driver, a device or fitting kernels are
 * missing. `NEURON_CUDA_GRAPHS=0` turns graph capture off, `NEURON_CUDA_FUSION=0` kernel
 * fusion (both for debugging on a GPU).
 */
export function createCudaBackend(options: CudaBackendOptions = {}): CudaBackend {
  const graphs = options.graphs ?? Deno.env.get("NEURON_CUDA_GRAPHS") !== "0";
  const fusion = options.fusion ?? Deno.env.get("NEURON_CUDA_FUSION") !== "0";
  return new CudaBackend(CudaContext.create({ ...options, graphs, fusion }));
}
