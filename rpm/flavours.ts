/**
 * The GPU flavours neuron is packaged for: one RPM each (`helexa-neuron-<flavour>`), named by
 * NVIDIA architecture family, each tied to the kernel build (`kernels/build/sm_<N>/`) of its
 * compute capability. The table is the kernels' own (kernels/cuda/flavours.json).
 */

import { FLAVOURS } from "../kernels/cuda/manifest.ts";

/** A package flavour's name: an architecture family of the table. */
export type PackageFlavour = string;

/** The kernel build of each package flavour. */
export const PACKAGE_FLAVOURS: Readonly<Record<PackageFlavour, string>> = Object.fromEntries(
  FLAVOURS.map((f) => [f.family, f.name]),
);

export function isPackageFlavour(name: string): name is PackageFlavour {
  return Object.hasOwn(PACKAGE_FLAVOURS, name);
}

/** Every flavour, in a stable order. */
export const ALL_FLAVOURS: readonly PackageFlavour[] = Object.keys(PACKAGE_FLAVOURS).sort();
