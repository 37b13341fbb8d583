/**
 * Device memory of one backend: weights and KV caches are exact allocations held until
 * close; activations and scratch come from a pool of freed blocks (sizes rounded up to
 * 1/8 of their power of two), since a model frees and re-creates its workspace as steps
 * grow and cuMemAlloc is slow and synchronising. Every byte is accounted per kind, which
 * is what /models reports as vram_used_mb.
 */

import { CudaError, mib } from "./errors.ts";
import type { CudaDriver } from "./driver.ts";
import { CUDA_ERROR_OUT_OF_MEMORY } from "./cu_result.ts";

export type MemoryKind = "weights" | "kv" | "activations" | "scratch";

export interface MemoryUsage {
  weights: number;
  kv: number;
  activations: number;
  scratch: number;
  /** Freed blocks kept for reuse. */
  cached: number;
  /** Everything this backend holds on the device. */
  total: number;
}

/** The size a pooled request is rounded up to. */
export function pooledSize(bytes: number): number {
  if (bytes <= 4096) return Math.ceil(bytes / 256) * 256;
  const step = 2 ** Math.floor(Math.log2(bytes)) / 8;
  return Math.ceil(bytes / step) * step;
}

interface Block {
  size: number;
  kind: MemoryKind;
  pooled: boolean;
}

export class DeviceMemory {
  readonly #driver: CudaDriver;
  readonly #sync: () => void;
  readonly #live = new Map<number, Block>();
  readonly #free = new Map<number, number[]>();
  readonly #used: Record<MemoryKind, number> = { weights: 0, kv: 0, activations: 0, scratch: 0 };
  #cached = 0;

  /** `sync` waits for the stream: cached blocks go back to the driver only when idle. */
  constructor(driver: CudaDriver, sync: () => void) {
    this.#driver = driver;
    this.#sync = sync;
  }

  usage(): MemoryUsage {
    const u = this.#used;
    const total = u.weights + u.kv + u.activations + u.scratch + this.#cached;
    return { ...u, cached: this.#cached, total };
  }

  /** Device address of `bytes` of new memory (contents undefined). */
  alloc(bytes: number, kind: MemoryKind): number {
    if (!Number.isSafeInteger(bytes) || bytes <= 0) {
      throw new CudaError("cuda_invalid_argument", `cannot allocate ${bytes} bytes`);
    }
    const pooled = kind === "activations" || kind === "scratch";
    const size = pooled ? pooledSize(bytes) : bytes;
    if (pooled) {
      const reuse = this.#free.get(size)?.pop();
      if (reuse !== undefined) {
        this.#cached -= size;
        return this.#track(reuse, size, kind, true);
      }
    }
    let got = this.#driver.memAlloc(size);
    if (got.rc === CUDA_ERROR_OUT_OF_MEMORY && this.#cached > 0) {
      this.trim();
      got = this.#driver.memAlloc(size);
    }
    if (got.rc === CUDA_ERROR_OUT_OF_MEMORY) {
      const { free, total } = this.#driver.memInfo();
      throw new CudaError(
        "cuda_out_of_memory",
        `out of GPU memory allocating ${mib(size)} of ${kind}: ${mib(free)} free of ` +
          `${mib(total)}, this model holds ${mib(this.usage().total)}`,
        got.rc,
      );
    }
    this.#driver.check("cuMemAlloc_v2", got.rc);
    return this.#track(got.ptr, size, kind, pooled);
  }

  #track(ptr: number, size: number, kind: MemoryKind, pooled: boolean): number {
    this.#live.set(ptr, { size, kind, pooled });
    this.#used[kind] += size;
    return ptr;
  }

  /** Returns a block: pooled ones are kept for reuse, the rest go back to the driver. */
  free(ptr: number): void {
    const b = this.#live.get(ptr);
    if (b === undefined) throw new CudaError("cuda_error", `free of unknown device address ${ptr}`);
    this.#live.delete(ptr);
    this.#used[b.kind] -= b.size;
    if (!b.pooled) {
      this.#driver.memFree(ptr);
      return;
    }
    const list = this.#free.get(b.size);
    if (list) list.push(ptr);
    else this.#free.set(b.size, [ptr]);
    this.#cached += b.size;
  }

  /** Gives every cached block back to the driver. */
  trim(): void {
    if (this.#cached === 0) return;
    this.#sync();
    for (const list of this.#free.values()) for (const p of list) this.#driver.memFree(p);
    this.#free.clear();
    this.#cached = 0;
  }

  /** Frees everything (the backend is closing). */
  releaseAll(): void {
    this.trim();
    for (const [ptr, b] of this.#live) {
      this.#driver.memFree(ptr);
      this.#used[b.kind] -= b.size;
    }
    this.#live.clear();
  }
}
