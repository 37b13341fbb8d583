/** A GPU as /discovery reports it (WIRE.md). */
export interface DeviceInfo {
  index: number;
  name: string;
  vram_total_mb: number;
  compute_capability: string;
}

/** A GPU's live numbers as /health reports them (WIRE.md). */
export interface DeviceHealth {
  index: number;
  vram_used_mb: number;
  vram_free_mb: number;
  utilization_pct: number;
  temp_c: number;
}

/** The static part of /discovery. */
export interface Discovery {
  cuda_version: string | null;
  driver_version: string | null;
  devices: DeviceInfo[];
  /** Set only when a CUDA library loaded but could not be used. */
  cuda_unavailable_reason?: string;
}

export const MIB = 1024 * 1024;
