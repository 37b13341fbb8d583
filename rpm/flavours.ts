/**
 * The GPU flavours neuron is packaged for: one RPM each (`helexa-neuron-<flavour>`), named by
 * NVIDIA architecture family, each tied to the kernel build (`kernels/build/sm_<N>/`) of its
 * compute capability.
 */

export const PACKAGE_FLAVOURS = {
  ada: "sm_89",
  blackwell: "sm_120",
  hopper: "sm_90",
} as const;

export type PackageFlavour = keyof typeof PACKAGE_FLAVOURS;

export function isPackageFlavour(name: string): name is PackageFlavour {
  return Object.hasOwn(PACKAGE_FLAVOURS, name);
}

/** Every flavour, in a stable order. */
export const ALL_FLAVOURS: readonly PackageFlavour[] = Object.keys(PACKAGE_FLAVOURS)
  .sort() as PackageFlavour[];
