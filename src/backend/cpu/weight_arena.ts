/**
 * Native memory for a model's weights, with `mmap = false`: the CPU backend copies every
 * tensor here at load instead of reading it in place from the mmapped GGUF. Decode streams
 * all weights once per token, and on 4 KiB pages a streaming core loses time to a page walk
 * every 4 KiB (dearer still under virtualization; the kernels' page prefetching hides most
 * of it, nk_internal.h). A mapping is on 2 MiB pages only where the page cache holds the
 * file in 2 MiB folios (common/huge_pages.ts); this arena always is. Measured on a 2-core VM with
 * a file cached in small folios, Q8_0 decode ran 36 tok/s from the mapping and 42 tok/s
 * from this copy; with huge folios, both run alike. The copy costs one pass over the file
 * at load and anonymous memory the size of the weights (the file's page cache stays
 * reclaimable).
 *
 * Tensors are packed back to back, 64-byte aligned, into chunks on transparent huge pages;
 * a tensor larger than a chunk gets one of its own.
 */

import { ensureHostFits, hostFits } from "./host_memory.ts";
import type { CpuKernels, NativeBuffer } from "./kernels.ts";

/** Large enough that the tail left unused in each chunk is a small fraction of it. */
const CHUNK_BYTES = 64 * 1024 * 1024;
const ALIGN = 64;

export class WeightArena {
  readonly #chunks: NativeBuffer[] = [];
  #current: NativeBuffer | null = null;
  #used = 0;

  constructor(private readonly kernels: CpuKernels) {}

  /** Bytes of native memory held. */
  get bytes(): number {
    return this.#chunks.reduce((sum, c) => sum + c.byteLength, 0);
  }

  /** Copies `bytes` into the arena and returns the address of the copy. */
  place(bytes: Uint8Array): Deno.PointerObject {
    const { buffer, offset } = this.#take(bytes.byteLength);
    buffer.u8().set(bytes, offset);
    return Deno.UnsafePointer.offset(buffer.pointer, offset)!;
  }

  /** `n` bytes of the arena for the caller to fill (a repacked tensor). */
  reserve(n: number): Deno.PointerObject {
    const { buffer, offset } = this.#take(n);
    return Deno.UnsafePointer.offset(buffer.pointer, offset)!;
  }

  /**
   * Whether `reserve(n)` would find its memory: room left in the current chunk, or the
   * allocation it would make fits in the host's available memory (`available`: tests).
   */
  canReserve(n: number, available?: number): boolean {
    const allocation = this.#allocationFor(Math.max(n, 1));
    return allocation === 0 || hostFits(allocation, available);
  }

  /** Bytes taking `n` more must allocate: 0 when the current chunk has room, else a chunk
   * (or a buffer of its own for a tensor larger than one). */
  #allocationFor(n: number): number {
    if (n > CHUNK_BYTES) return n;
    const offset = Math.ceil(this.#used / ALIGN) * ALIGN;
    return this.#current !== null && offset + n <= this.#current.byteLength ? 0 : CHUNK_BYTES;
  }

  #take(bytes: number): { buffer: NativeBuffer; offset: number } {
    const n = Math.max(bytes, 1);
    const allocation = this.#allocationFor(n);
    // Every page is written at once: an arena the host cannot hold would meet the OOM
    // killer during the load rather than fail it.
    if (allocation > 0) ensureHostFits(allocation, "the weights");
    if (n > CHUNK_BYTES) {
      const own = this.kernels.allocHuge(n);
      this.#chunks.push(own);
      return { buffer: own, offset: 0 };
    }
    if (allocation > 0) {
      this.#current = this.kernels.allocHuge(CHUNK_BYTES);
      this.#chunks.push(this.#current);
      this.#used = n;
      return { buffer: this.#current, offset: 0 };
    }
    const offset = Math.ceil(this.#used / ALIGN) * ALIGN;
    this.#used = offset + n;
    return { buffer: this.#current!, offset };
  }

  /** Frees every chunk; addresses handed out become invalid. */
  free(): void {
    for (const c of this.#chunks) c.free();
    this.#chunks.length = 0;
    this.#current = null;
    this.#used = 0;
  }
}
