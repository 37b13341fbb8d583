/**
 * The GPU under test for `deno task test:gpu`. Without a usable GPU every test is skipped
 * and a notice says why. NEURON_TEST_LIBCUDA / NEURON_TEST_LIBCUBLAS point the suite at
 * other libraries, e.g. the emulator (kernels/build/emu/libcuda_emu.so), for a dry run of
 * the suite on a machine without a GPU.
 */

import { errorMessage } from "../../src/common/errors.ts";
import {
  createCudaBackend,
  type CudaBackend,
  type CudaBackendOptions,
} from "../../src/backend/cuda/mod.ts";

export function gpuOptions(extra: CudaBackendOptions = {}): CudaBackendOptions {
  const libcuda = Deno.env.get("NEURON_TEST_LIBCUDA");
  const libcublas = Deno.env.get("NEURON_TEST_LIBCUBLAS");
  return { ...(libcuda ? { libcuda } : {}), ...(libcublas ? { libcublas } : {}), ...extra };
}

/** True when the suite runs on stand-in libraries rather than the real driver. */
export const EMULATED = Deno.env.get("NEURON_TEST_LIBCUDA") !== undefined;

let cublasLoaded = false;

function probe(): string | null {
  try {
    const be = createCudaBackend(gpuOptions());
    const info = be.info();
    be.close();
    cublasLoaded = info.cublas;
    console.log(
      `test:gpu on ${info.device} (compute ${info.computeCapability}, ${info.flavour} ${info.image}, ` +
        `cuBLAS ${info.cublas ? "yes" : "no"})`,
    );
    return null;
  } catch (err) {
    return errorMessage(err);
  }
}

const unavailable = probe();
if (unavailable !== null) {
  console.warn(`NOTICE test:gpu: no usable GPU, GPU tests skipped: ${unavailable}`);
}

export const HAS_GPU = unavailable === null;
/** Whether the GPU's backend loads cuBLAS: without it the cuBLAS path's tests are skipped. */
export const HAS_CUBLAS = HAS_GPU && cublasLoaded;
if (HAS_GPU && !HAS_CUBLAS) {
  console.warn("NOTICE test:gpu: libcublas not found, the cuBLAS prefill path is not tested");
}

/** A test on a fresh backend (closed afterwards). */
export function gpuTest(
  name: string,
  fn: (be: CudaBackend) => void | Promise<void>,
  options: CudaBackendOptions = {},
  needsCublas = false,
): void {
  Deno.test({
    name: `gpu: ${name}`,
    ignore: !HAS_GPU || (needsCublas && !HAS_CUBLAS),
    async fn() {
      const be = createCudaBackend(gpuOptions(options));
      try {
        await fn(be);
      } finally {
        be.close();
      }
    },
  });
}
