/**
 * Kernel flavours: the PTX targets the build produces, and the choice among them for a
 * device. PTX for compute_N runs on any GPU of compute capability N or newer (the driver
 * compiles it at load), so a device takes the newest flavour not newer than itself, and
 * the exact-match cubin when one exists.
 */

import { type Flavour, FLAVOURS } from "../../../kernels/cuda/manifest.ts";
import { CudaUnavailableError } from "./errors.ts";

export { type Flavour, FLAVOURS };

/** "8.9" from 89. */
export function ccString(cc: number): string {
  return `${Math.floor(cc / 10)}.${cc % 10}`;
}

export interface FlavourChoice {
  flavour: Flavour;
  /** The device is exactly this architecture: its cubin needs no JIT. */
  exact: boolean;
}

/** The flavour for a device of compute capability `cc` among the `available` builds. */
export function selectFlavour(cc: number, available: readonly string[]): FlavourChoice {
  const built = FLAVOURS.filter((f) => available.includes(f.name));
  if (built.length === 0) {
    throw new CudaUnavailableError(
      "no CUDA kernels are built (kernels/build/sm_*): run `deno task kernels:cuda`",
    );
  }
  const fits = built.filter((f) => f.cc <= cc).sort((a, b) => b.cc - a.cc);
  if (fits.length === 0) {
    const names = built.map((f) => `${f.name} (${f.family}, ${ccString(f.cc)})`).join(", ");
    throw new CudaUnavailableError(
      `no kernel flavour runs on compute capability ${ccString(cc)}: this build has ${names}; ` +
        `a GPU of compute capability ${ccString(built[0].cc)} or newer is needed`,
    );
  }
  return { flavour: fits[0], exact: fits[0].cc === cc };
}
