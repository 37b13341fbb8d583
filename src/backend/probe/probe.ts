import { type CudaDevice, probeCuda } from "./cuda.ts";
import { Nvml } from "./nvml.ts";
import type { DeviceHealth, Discovery } from "./types.ts";

export interface ProbeLibraries {
  libcuda: string;
  libnvml: string;
}

/**
 * The host's GPUs, probed once at start (the device set does not change under a running
 * driver) with live numbers read from NVML on each /health. Without the libraries it
 * reports no devices and no error: a CPU node is a normal node.
 */
export class DeviceProbe {
  readonly #discovery: Discovery;
  readonly #devices: CudaDevice[];
  readonly #nvml: Nvml | null;

  private constructor(discovery: Discovery, devices: CudaDevice[], nvml: Nvml | null) {
    this.#discovery = discovery;
    this.#devices = devices;
    this.#nvml = nvml;
  }

  static open(libs: ProbeLibraries): DeviceProbe {
    const cuda = probeCuda(libs.libcuda);
    if (cuda.state === "absent") {
      return new DeviceProbe({ cuda_version: null, driver_version: null, devices: [] }, [], null);
    }
    const nvml = Nvml.open(libs.libnvml);
    const driver_version = nvml?.driverVersion() ?? null;
    if (cuda.state === "failed") {
      return new DeviceProbe(
        { cuda_version: null, driver_version, devices: [], cuda_unavailable_reason: cuda.reason },
        [],
        nvml,
      );
    }
    const devices = cuda.devices.map(({ pci_bus_id: _, ...info }) => info);
    return new DeviceProbe(
      { cuda_version: cuda.cuda_version, driver_version, devices },
      cuda.devices,
      nvml,
    );
  }

  discovery(): Discovery {
    return this.#discovery;
  }

  /** Per-GPU live numbers; zeros (and free = total) for what NVML cannot tell. */
  health(): DeviceHealth[] {
    return this.#devices.map((d) => {
      let stats = null;
      try {
        stats = this.#nvml?.stats(d.pci_bus_id) ?? null;
      } catch {
        stats = null;
      }
      return {
        index: d.index,
        vram_used_mb: stats?.used_mb ?? 0,
        vram_free_mb: stats?.free_mb ?? d.vram_total_mb,
        utilization_pct: stats?.utilization_pct ?? 0,
        temp_c: stats?.temp_c ?? 0,
      };
    });
  }
}
