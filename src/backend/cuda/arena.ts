/**
 * The step arena: the per-step integers the kernels read (token ids, positions, row ->
 * sequence maps, block tables, gather indices), packed into page-locked host memory as the
 * ops are recorded and sent to a fixed device buffer with one copy before the step runs.
 * Offsets depend only on what was put and in which order, so two steps of the same shape
 * put their data at the same addresses: a captured graph replays with the new values.
 */

import type { CudaDriver } from "./driver.ts";
import { CudaError } from "./errors.ts";
import type { DeviceMemory } from "./memory.ts";
import { CU_EVENT_DISABLE_TIMING } from "./driver_symbols.ts";

const ALIGN = 64;

export class StepArena {
  readonly #driver: CudaDriver;
  readonly #memory: DeviceMemory;
  #host: { ptr: Deno.PointerObject; buffer: ArrayBuffer } | null = null;
  #i32 = new Int32Array(0);
  #device = 0;
  #capacity = 0;
  #used = 0;
  readonly #uploaded: Deno.PointerValue;
  #uploadPending = false;

  constructor(driver: CudaDriver, memory: DeviceMemory, capacity: number) {
    this.#driver = driver;
    this.#memory = memory;
    this.#uploaded = driver.eventCreate(CU_EVENT_DISABLE_TIMING);
    this.#allocate(capacity);
  }

  /** Device address of the arena: changes only when it grows. */
  get device(): number {
    return this.#device;
  }

  get used(): number {
    return this.#used;
  }

  /** Whether `bytes` more fit without growing. */
  fits(bytes: number): boolean {
    return this.#used + bytes + ALIGN <= this.#capacity;
  }

  #allocate(capacity: number): void {
    this.#host = this.#driver.memAllocHost(capacity);
    this.#i32 = new Int32Array(this.#host.buffer);
    this.#device = this.#memory.alloc(capacity, "scratch");
    this.#capacity = capacity;
  }

  /**
   * Replaces the buffers by ones of at least `bytes` (the caller has flushed and
   * synchronised: nothing in flight reads the old ones).
   */
  grow(bytes: number): void {
    this.#release();
    let capacity = this.#capacity;
    while (capacity < bytes + ALIGN) capacity *= 2;
    this.#allocate(capacity);
    this.#used = 0;
  }

  /** Waits until the last upload has left the host buffer, before it is written again. */
  #beforeWrite(): void {
    if (!this.#uploadPending) return;
    this.#driver.check("cuEventSynchronize", this.#driver.sym.cuEventSynchronize(this.#uploaded));
    this.#uploadPending = false;
  }

  /** Copies `data` in; returns its device address. */
  put(data: Int32Array): number {
    return this.fill(data.length, (view) => view.set(data));
  }

  /** Space for `n` ints, filled by `fill` (a view of exactly that space). */
  fill(n: number, fill: (view: Int32Array) => void): number {
    if (!this.fits(4 * n)) {
      throw new CudaError("cuda_error", `step arena overrun: ${4 * n} bytes not reserved`);
    }
    this.#beforeWrite();
    const at = this.#used;
    fill(this.#i32.subarray(at / 4, at / 4 + n));
    this.#used = at + Math.ceil((4 * Math.max(1, n)) / ALIGN) * ALIGN;
    return this.#device + at;
  }

  /** Sends what was put to the device on `stream` and starts over. */
  upload(stream: Deno.PointerValue): void {
    if (this.#used === 0 || this.#host === null) return;
    const sym = this.#driver.sym;
    this.#driver.check(
      "cuMemcpyHtoDAsync_v2",
      sym.cuMemcpyHtoDAsync_v2(BigInt(this.#device), this.#host.ptr, BigInt(this.#used), stream),
    );
    this.#driver.check("cuEventRecord", sym.cuEventRecord(this.#uploaded, stream));
    this.#uploadPending = true;
    this.#used = 0;
  }

  /** Forgets what was put (nothing is sent). */
  reset(): void {
    this.#used = 0;
  }

  #release(): void {
    this.#beforeWrite();
    if (this.#host !== null) this.#driver.memFreeHost(this.#host.ptr);
    if (this.#device !== 0) this.#memory.free(this.#device);
    this.#host = null;
    this.#device = 0;
  }

  close(): void {
    this.#release();
    this.#driver.check("cuEventDestroy_v2", this.#driver.sym.cuEventDestroy_v2(this.#uploaded));
  }
}
