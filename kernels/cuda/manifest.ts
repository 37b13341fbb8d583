/**
 * What the CUDA build (kernels/build_cuda.ts) writes and the CUDA backend reads: the kernel
 * flavours (kernels/cuda/flavours.json, the one table of them: the build, the loader and
 * the RPM packages all read it) and each flavour's manifest.json.
 */

import table from "./flavours.json" with { type: "json" };

/** A PTX target the build produces. */
export interface Flavour {
  /** Build directory and ptxas target, e.g. "sm_90". */
  name: string;
  /** Compute capability as major * 10 + minor. */
  cc: number;
  /** The architecture's family name: the RPM flavour and what messages say. */
  family: string;
}

/** ada (also runs on hopper by JIT), hopper, blackwell. */
export const FLAVOURS: readonly Flavour[] = table;

export interface ModuleManifest {
  name: string;
  ptx: string;
  cubin: string;
  /** Kernel entry points and their PTX parameter types (u64, u32, f32), in order. */
  entries: Record<string, string[]>;
}

export interface FlavourManifest {
  flavour: string;
  ptxVersion: string;
  modules: ModuleManifest[];
}
