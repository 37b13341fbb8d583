/**
 * The libcuda driver API, opened with Deno.dlopen: every call's CUresult is checked and a
 * failure becomes a CudaError naming the call and the result (`cuda_error`). Opening checks
 * that the library loads, initialises and sees a device; any failure there is
 * `cuda_unavailable` with the loader's or driver's reason.
 */

import { CudaError, CudaUnavailableError } from "./errors.ts";
import { ATTR, DRIVER_SYMBOLS, type DriverSymbols } from "./driver_symbols.ts";
import { openLibrary } from "./libraries.ts";
import { cuResultName } from "./cu_result.ts";

export interface DeviceProps {
  index: number;
  name: string;
  totalBytes: number;
  /** Compute capability as major * 10 + minor (8.9 -> 89). */
  cc: number;
  multiprocessors: number;
}

function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return new TextDecoder().decode(end < 0 ? buf : buf.subarray(0, end));
}

export class CudaDriver {
  readonly path: string;
  /** The raw entry points, for the launch path; everything else goes through methods. */
  readonly sym: DriverSymbols;
  readonly #lib: Deno.DynamicLibrary<typeof DRIVER_SYMBOLS>;
  readonly #out64 = new BigUint64Array(1);
  readonly #out32 = new Int32Array(1);

  private constructor(lib: Deno.DynamicLibrary<typeof DRIVER_SYMBOLS>, path: string) {
    this.#lib = lib;
    this.sym = lib.symbols;
    this.path = path;
  }

  /** Loads and initialises the driver; `cuda_unavailable` when it cannot be used. */
  static open(libcuda: string): CudaDriver {
    const { lib, path } = openLibrary("libcuda", libcuda, DRIVER_SYMBOLS);
    const driver = new CudaDriver(lib, path);
    const rc = driver.sym.cuInit(0);
    if (rc !== 0) {
      lib.close();
      throw new CudaUnavailableError(`${path}: cuInit failed: ${driver.describe(rc)}`);
    }
    const count = driver.deviceCount();
    if (count === 0) {
      lib.close();
      throw new CudaUnavailableError(`${path}: the driver sees no CUDA device`);
    }
    return driver;
  }

  /** "CUDA_ERROR_NO_DEVICE (100)", with the driver's description when it has one. */
  describe(rc: number): string {
    let text = `${cuResultName(rc)} (${rc})`;
    const fn = this.sym.cuGetErrorString;
    if (fn && fn(rc, this.#out64) === 0 && this.#out64[0] !== 0n) {
      const p = Deno.UnsafePointer.create(this.#out64[0]);
      const description = p ? Deno.UnsafePointerView.getCString(p) : "";
      if (description && description !== cuResultName(rc)) text += `: ${description}`;
    }
    return text;
  }

  /** Throws a CudaError for a non-zero CUresult of `call`. */
  check(call: string, rc: number): void {
    if (rc !== 0) throw new CudaError("cuda_error", `${call} failed: ${this.describe(rc)}`, rc);
  }

  version(): number {
    this.check("cuDriverGetVersion", this.sym.cuDriverGetVersion(this.#out32));
    return this.#out32[0];
  }

  deviceCount(): number {
    this.check("cuDeviceGetCount", this.sym.cuDeviceGetCount(this.#out32));
    return this.#out32[0];
  }

  #attribute(attr: number, dev: number): number {
    this.check("cuDeviceGetAttribute", this.sym.cuDeviceGetAttribute(this.#out32, attr, dev));
    return this.#out32[0];
  }

  device(index: number): DeviceProps {
    const count = this.deviceCount();
    if (!Number.isInteger(index) || index < 0 || index >= count) {
      throw new CudaUnavailableError(
        `CUDA device ${index} does not exist (this host has ${count})`,
      );
    }
    this.check("cuDeviceGet", this.sym.cuDeviceGet(this.#out32, index));
    const dev = this.#out32[0];
    const name = new Uint8Array(256);
    this.check("cuDeviceGetName", this.sym.cuDeviceGetName(name, name.length, dev));
    this.check("cuDeviceTotalMem_v2", this.sym.cuDeviceTotalMem_v2(this.#out64, dev));
    const totalBytes = Number(this.#out64[0]);
    const major = this.#attribute(ATTR.COMPUTE_CAPABILITY_MAJOR, dev);
    const minor = this.#attribute(ATTR.COMPUTE_CAPABILITY_MINOR, dev);
    return {
      index: dev,
      name: cString(name),
      totalBytes,
      cc: major * 10 + minor,
      multiprocessors: this.#attribute(ATTR.MULTIPROCESSOR_COUNT, dev),
    };
  }

  /** Retains device `dev`'s primary context and makes it current on this thread. */
  retainPrimaryContext(dev: number): Deno.PointerValue {
    this.check("cuDevicePrimaryCtxRetain", this.sym.cuDevicePrimaryCtxRetain(this.#out64, dev));
    const ctx = Deno.UnsafePointer.create(this.#out64[0]);
    this.check("cuCtxSetCurrent", this.sym.cuCtxSetCurrent(ctx));
    return ctx;
  }

  releasePrimaryContext(dev: number): void {
    this.check("cuDevicePrimaryCtxRelease_v2", this.sym.cuDevicePrimaryCtxRelease_v2(dev));
  }

  /** Free and total device memory of the current context's device, in bytes. */
  memInfo(): { free: number; total: number } {
    const free = new BigUint64Array(1);
    const total = new BigUint64Array(1);
    this.check("cuMemGetInfo_v2", this.sym.cuMemGetInfo_v2(free, total));
    return { free: Number(free[0]), total: Number(total[0]) };
  }

  /** A device allocation's address; the raw CUresult is returned through `rc` on failure. */
  memAlloc(bytes: number): { ptr: number; rc: number } {
    const rc = this.sym.cuMemAlloc_v2(this.#out64, BigInt(bytes));
    return { ptr: rc === 0 ? Number(this.#out64[0]) : 0, rc };
  }

  memFree(ptr: number): void {
    this.check("cuMemFree_v2", this.sym.cuMemFree_v2(BigInt(ptr)));
  }

  /** Page-locked host memory of `bytes`, and a view of it. */
  memAllocHost(bytes: number): { ptr: Deno.PointerObject; buffer: ArrayBuffer } {
    this.check("cuMemAllocHost_v2", this.sym.cuMemAllocHost_v2(this.#out64, BigInt(bytes)));
    const ptr = Deno.UnsafePointer.create(this.#out64[0]);
    if (ptr === null) throw new CudaError("cuda_error", "cuMemAllocHost_v2 returned NULL");
    return { ptr, buffer: Deno.UnsafePointerView.getArrayBuffer(ptr, bytes) };
  }

  memFreeHost(ptr: Deno.PointerObject): void {
    this.check("cuMemFreeHost", this.sym.cuMemFreeHost(ptr));
  }

  streamCreate(flags: number): Deno.PointerValue {
    this.check("cuStreamCreate", this.sym.cuStreamCreate(this.#out64, flags));
    return Deno.UnsafePointer.create(this.#out64[0]);
  }

  eventCreate(flags: number): Deno.PointerValue {
    this.check("cuEventCreate", this.sym.cuEventCreate(this.#out64, flags));
    return Deno.UnsafePointer.create(this.#out64[0]);
  }

  /** Milliseconds between two recorded events. */
  elapsedMs(start: Deno.PointerValue, end: Deno.PointerValue): number {
    const out = new Float32Array(1);
    const fn = this.sym.cuEventElapsedTime_v2 ?? this.sym.cuEventElapsedTime;
    if (!fn) throw new CudaError("cuda_error", "the driver has no cuEventElapsedTime");
    this.check("cuEventElapsedTime", fn(out, start, end));
    return out[0];
  }

  close(): void {
    this.#lib.close();
  }
}
