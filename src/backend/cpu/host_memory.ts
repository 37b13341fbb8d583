/**
 * The host's memory as the CPU backend's device memory: an allocation larger than what the
 * kernel reports available is refused up front, since the pages of an oversized one would
 * only fail when touched (the OOM killer, mid-request) rather than at load.
 */

import { CpuKernelError } from "./errors.ts";

/** Left to the process itself, its buffers and the page cache the weights stream from. */
export const HOST_HEADROOM_BYTES = 256 * 1024 * 1024;

function mib(bytes: number): string {
  return `${Math.ceil(bytes / 2 ** 20)} MiB`;
}

/** Whether `bytes` more fit in the host's available memory, the headroom left. */
export function hostFits(
  bytes: number,
  available: number = Deno.systemMemoryInfo().available,
): boolean {
  return bytes + HOST_HEADROOM_BYTES <= available;
}

/** Throws `cpu_out_of_memory` unless `bytes` more fit in the host's available memory. */
export function ensureHostFits(
  bytes: number,
  what: string,
  available: number = Deno.systemMemoryInfo().available,
): void {
  if (!hostFits(bytes, available)) {
    throw new CpuKernelError(
      "cpu_out_of_memory",
      `${what} needs ${mib(bytes)} of memory (plus ${mib(HOST_HEADROOM_BYTES)} headroom) but ` +
        `the host has ${mib(available)} available`,
    );
  }
}
