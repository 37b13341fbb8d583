/**
 * What some backends offer beyond the ops: device memory accounting (a GPU), a memory
 * bandwidth probe (not the reference) and a timing of each op (the CPU backend's op lists). Callers ask a backend for them by feature, not by
 * class; nothing here needs the Backend interface itself.
 */

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
export function deviceMemoryOf(backend: object): DeviceMemory | null {
  const b = backend as Partial<DeviceMemory>;
  return typeof b.ensureFits === "function" && typeof b.deviceBytes === "function"
    ? b as DeviceMemory
    : null;
}

/** What a backend with a meaningful memory bandwidth figure (not the reference) adds. */
export interface BandwidthProbe {
  /** Memory read bandwidth of this device in GB/s, measured now. */
  bandwidthGBs(): number;
}

/** The backend's bandwidth probe, or null where it has none. */
export function bandwidthProbeOf(backend: object): BandwidthProbe | null {
  const b = backend as Partial<BandwidthProbe>;
  return typeof b.bandwidthGBs === "function" ? b as BandwidthProbe : null;
}

/** The native time of one kind of op (by its recorded name), summed over its calls. */
export interface OpTime {
  op: string;
  calls: number;
  ms: number;
}

/** What a backend that can time its ops one by one as they run adds. */
export interface OpProfiler {
  /** Starts timing every op (forgetting what was kept), or stops. */
  profileOps(on: boolean): void;
  /** Each kind of op's time since profiling started or this was last called; clears it. */
  takeOpProfile(): OpTime[];
}

/** The backend's op profiler, or null where it has none. */
export function opProfilerOf(backend: object): OpProfiler | null {
  const b = backend as Partial<OpProfiler>;
  return typeof b.profileOps === "function" && typeof b.takeOpProfile === "function"
    ? b as OpProfiler
    : null;
}
