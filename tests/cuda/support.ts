/**
 * Emulated CUDA for the normal suite: the PTX build (which the backend loads as on a GPU)
 * and the CPU emulator standing in for libcuda and libcublas, one private copy per test
 * module. Where nvcc or g++ is
 * missing the tests that need them are skipped, with a notice saying so.
 */

import { buildCudaKernels, nvccAvailable } from "../../kernels/build_cuda.ts";
import { buildEmulator, cxxAvailable, EmuControl } from "./emu/build_emu.ts";
import {
  createCudaBackend,
  type CudaBackend,
  type CudaBackendOptions,
} from "../../src/backend/cuda/mod.ts";

export interface Emulator {
  lib: string;
  control: EmuControl;
  /** A backend on the emulated GPU (cuBLAS from the emulator too, unless disabled). */
  backend(options?: CudaBackendOptions): CudaBackend;
  /** Runner options that put a model on the emulated GPU, one host thread. */
  runner: { device: "cuda"; threads: number; cuda: CudaBackendOptions };
}

let pending: Promise<Emulator | null> | null = null;

async function setup(): Promise<Emulator | null> {
  if (!(await cxxAvailable())) {
    console.warn("NOTICE tests/cuda: g++ not found: emulated CUDA tests skipped");
    return null;
  }
  if (!(await nvccAvailable())) {
    console.warn("NOTICE tests/cuda: nvcc not found: PTX build and emulated CUDA tests skipped");
    return null;
  }
  await buildCudaKernels();
  // `deno test --parallel` runs modules as threads of one process and the emulator is
  // single-threaded (one current fiber, one device): each module loads its own copy.
  const lib = await Deno.makeTempFile({ prefix: "libcuda_emu-", suffix: ".so" });
  await Deno.copyFile(await buildEmulator(), lib);
  globalThis.addEventListener("unload", () => Deno.removeSync(lib));
  const control = new EmuControl(lib);
  return {
    lib,
    control,
    backend: (options = {}) => createCudaBackend({ libcuda: lib, libcublas: lib, ...options }),
    runner: { device: "cuda", threads: 1, cuda: { libcuda: lib, libcublas: lib } },
  };
}

/** The emulator (built once per process), or null where it cannot be built. */
export function emulator(): Promise<Emulator | null> {
  pending ??= setup();
  return pending;
}

/**
 * `check` on a fresh emulated backend with fusion off, then on: each run's result and the
 * launches it recorded, for tests that fused kernels equal the plain ones in fewer launches.
 */
export function fusionRuns<T>(
  emu: Emulator,
  check: (be: CudaBackend) => T,
): { outs: T; launches: number }[] {
  return [false, true].map((fusion) => {
    const be = emu.backend({ fusion });
    try {
      const outs = check(be);
      return { outs, launches: be.stats().launches };
    } finally {
      be.close();
    }
  });
}

/** The emulator's device settings back to a plain 9.0 GPU with 16 GiB (an H100's registers). */
export function resetEmulator(emu: Emulator): void {
  for (
    const [k, v] of Object.entries({
      init_result: 0,
      device_count: 1,
      cc_major: 9,
      cc_minor: 0,
      total_mb: 16384,
      regs_per_block: 65536,
    })
  ) {
    emu.control.set(k, v);
  }
}
