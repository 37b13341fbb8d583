/**
 * What some backends offer beyond the ops: device memory accounting (a GPU) and a memory
 * bandwidth probe (not the reference). Callers ask for them by feature, not by class.
 */

import type { Backend } from "./backend.ts";

/** What a backend whose memory is a device's (a GPU) adds: checked once, at load. */
export interface DeviceMemory {
  /**
   * Fails, before anything is allocated, when `bytes` more would not fit in the device's
   * free memory (the error carries the numbers).
   */
  ensureFits(bytes: number, what?: string): void;
  /** Bytes this backend holds on the device now. */
  deviceBytes(): number;
}

/** The backend's device memory, or null where its memory is the host's. */
export function deviceMemoryOf(backend: Backend): DeviceMemory | null {
  const b = backend as Backend & Partial<DeviceMemory>;
  return typeof b.ensureFits === "function" && typeof b.deviceBytes === "function"
    ? b as Backend & DeviceMemory
    : null;
}

/** What a backend with a meaningful memory bandwidth figure (not the reference) adds. */
export interface BandwidthProbe {
  /** Memory read bandwidth of this device in GB/s, measured now. */
  bandwidthGBs(): number;
}

/** The backend's bandwidth probe, or null where it has none. */
export function bandwidthProbeOf(backend: Backend): BandwidthProbe | null {
  const b = backend as Backend & Partial<BandwidthProbe>;
  return typeof b.bandwidthGBs === "function" ? b as Backend & BandwidthProbe : null;
}
