import { cString, toCString } from "./cstr.ts";
import { MIB } from "./types.ts";

/**
 * NVML (libnvidia-ml) for the numbers the CUDA driver API does not give without a context:
 * memory in use, utilisation, temperature, and the driver's version string.
 */

const SYMBOLS = {
  nvmlInit_v2: { parameters: [], result: "i32" },
  nvmlSystemGetDriverVersion: { parameters: ["buffer", "u32"], result: "i32" },
  nvmlDeviceGetHandleByPciBusId_v2: { parameters: ["buffer", "buffer"], result: "i32" },
  nvmlDeviceGetMemoryInfo: { parameters: ["pointer", "buffer"], result: "i32" },
  nvmlDeviceGetUtilizationRates: { parameters: ["pointer", "buffer"], result: "i32" },
  nvmlDeviceGetTemperature: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
} as const;

const NVML_TEMPERATURE_GPU = 0;

export interface GpuLiveStats {
  used_mb: number;
  free_mb: number;
  utilization_pct: number;
  temp_c: number;
}

export class Nvml {
  readonly #lib: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
  readonly #handles = new Map<string, Deno.PointerValue>();

  private constructor(lib: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"]) {
    this.#lib = lib;
  }

  /** The initialised library, or null when it is absent or will not initialise. */
  static open(path: string): Nvml | null {
    let dl: Deno.DynamicLibrary<typeof SYMBOLS>;
    try {
      dl = Deno.dlopen(path, SYMBOLS);
    } catch {
      return null;
    }
    if (dl.symbols.nvmlInit_v2() !== 0) {
      dl.close();
      return null;
    }
    return new Nvml(dl.symbols);
  }

  driverVersion(): string | null {
    const buf = new Uint8Array(96);
    return this.#lib.nvmlSystemGetDriverVersion(buf, buf.length) === 0 ? cString(buf) : null;
  }

  #handle(pciBusId: string): Deno.PointerValue {
    if (this.#handles.has(pciBusId)) return this.#handles.get(pciBusId) ?? null;
    const out = new BigUint64Array(1);
    const ok = this.#lib.nvmlDeviceGetHandleByPciBusId_v2(toCString(pciBusId), out) === 0;
    const handle = ok ? Deno.UnsafePointer.create(out[0]) : null;
    this.#handles.set(pciBusId, handle);
    return handle;
  }

  /** Live numbers for the GPU at `pciBusId`; null when NVML does not know it. */
  stats(pciBusId: string): GpuLiveStats | null {
    const handle = this.#handle(pciBusId);
    if (!handle) return null;
    const mem = new BigUint64Array(3); // nvmlMemory_t: total, free, used
    if (this.#lib.nvmlDeviceGetMemoryInfo(handle, mem) !== 0) return null;
    const util = new Uint32Array(2); // nvmlUtilization_t: gpu, memory
    const utilOk = this.#lib.nvmlDeviceGetUtilizationRates(handle, util) === 0;
    const temp = new Uint32Array(1);
    const tempOk = this.#lib.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU, temp) === 0;
    return {
      used_mb: Math.floor(Number(mem[2]) / MIB),
      free_mb: Math.floor(Number(mem[1]) / MIB),
      utilization_pct: utilOk ? util[0] : 0,
      temp_c: tempOk ? temp[0] : 0,
    };
  }
}
