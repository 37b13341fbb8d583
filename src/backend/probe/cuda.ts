import { errorMessage } from "../../common/errors.ts";
import { cString } from "./cstr.ts";
import { cuResultName } from "../cuda/cu_result.ts";
import { type DeviceInfo, MIB } from "./types.ts";

/**
 * Asks the CUDA driver API what GPUs this host has. Only discovery calls are used here: no
 * context is created, so probing costs no device memory.
 */

const SYMBOLS = {
  cuInit: { parameters: ["u32"], result: "i32" },
  cuDriverGetVersion: { parameters: ["buffer"], result: "i32" },
  cuDeviceGetCount: { parameters: ["buffer"], result: "i32" },
  cuDeviceGet: { parameters: ["buffer", "i32"], result: "i32" },
  cuDeviceGetName: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuDeviceTotalMem_v2: { parameters: ["buffer", "i32"], result: "i32" },
  cuDeviceGetAttribute: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuDeviceGetPCIBusId: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  cuGetErrorName: { parameters: ["i32", "buffer"], result: "i32", optional: true },
} as const;

const ATTR_CC_MAJOR = 75;
const ATTR_CC_MINOR = 76;

export interface CudaDevice extends DeviceInfo {
  /** `0000:01:00.0`: how NVML finds the same GPU (its ordering may differ from CUDA's). */
  pci_bus_id: string;
}

export type CudaProbe =
  | { state: "absent"; detail: string }
  | { state: "failed"; reason: string }
  | { state: "ok"; cuda_version: string; devices: CudaDevice[] };

type Lib = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

class CudaCallError extends Error {}

function checker(lib: Lib): (call: string, code: number) => void {
  return (call, code) => {
    if (code === 0) return;
    let name = cuResultName(code);
    if (lib.cuGetErrorName) {
      const out = new BigUint64Array(1);
      if (lib.cuGetErrorName(code, out) === 0 && out[0] !== 0n) {
        const ptr = Deno.UnsafePointer.create(out[0]);
        if (ptr) name = `${Deno.UnsafePointerView.getCString(ptr)} (${code})`;
      }
    }
    throw new CudaCallError(`${call} failed: ${name}`);
  };
}

function int(fill: (buf: Int32Array) => void): number {
  const buf = new Int32Array(1);
  fill(buf);
  return buf[0];
}

/** Major.minor from the driver's integer form (13000 -> "13.0"). */
export function cudaVersionString(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

/** Never throws: a missing library is "absent", a broken one "failed" with the reason. */
export function probeCuda(path: string): CudaProbe {
  let dl: Deno.DynamicLibrary<typeof SYMBOLS>;
  try {
    dl = Deno.dlopen(path, SYMBOLS);
  } catch (err) {
    return { state: "absent", detail: errorMessage(err) };
  }
  try {
    const lib = dl.symbols;
    const check = checker(lib);
    check("cuInit", lib.cuInit(0));
    const version = int((b) => check("cuDriverGetVersion", lib.cuDriverGetVersion(b)));
    const count = int((b) => check("cuDeviceGetCount", lib.cuDeviceGetCount(b)));
    const devices: CudaDevice[] = [];
    for (let index = 0; index < count; index++) {
      const dev = int((b) => check("cuDeviceGet", lib.cuDeviceGet(b, index)));
      const name = new Uint8Array(256);
      check("cuDeviceGetName", lib.cuDeviceGetName(name, name.length, dev));
      const bytes = new BigUint64Array(1);
      check("cuDeviceTotalMem_v2", lib.cuDeviceTotalMem_v2(bytes, dev));
      const major = int((b) =>
        check("cuDeviceGetAttribute", lib.cuDeviceGetAttribute(b, ATTR_CC_MAJOR, dev))
      );
      const minor = int((b) =>
        check("cuDeviceGetAttribute", lib.cuDeviceGetAttribute(b, ATTR_CC_MINOR, dev))
      );
      const bus = new Uint8Array(64);
      check("cuDeviceGetPCIBusId", lib.cuDeviceGetPCIBusId(bus, bus.length, dev));
      devices.push({
        index,
        name: cString(name),
        vram_total_mb: Math.floor(Number(bytes[0]) / MIB),
        compute_capability: `${major}.${minor}`,
        pci_bus_id: cString(bus),
      });
    }
    return { state: "ok", cuda_version: cudaVersionString(version), devices };
  } catch (err) {
    dl.close();
    return { state: "failed", reason: `${path}: ${errorMessage(err)}` };
  }
}
