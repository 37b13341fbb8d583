/**
 * The CPU backend's paged KV cache: per layer one K and one V buffer in the layout the
 * kernel library indexes (kv_layout.ts).
 */

import { type KvCache, kvCacheBytes, type KvCacheSpec } from "../backend.ts";
import type { CpuKernels } from "./kernels.ts";
import { type KvLayout, kvLayoutBytes, kvTypeId } from "./kv_layout.ts";
import type { NativeBuffer } from "./native_buffer.ts";

/** Transparent huge pages' size. */
const HUGE_PAGE_BYTES = 2 * 1024 * 1024;

export class CpuKvCache implements KvCache {
  readonly layout: KvLayout;
  readonly bytes: number;
  readonly k: NativeBuffer[];
  readonly v: NativeBuffer[];

  /** Allocates the layers' buffers, each handed to `own` (the backend, which frees them);
   * those on huge pages are backed at once by `prefault`. */
  constructor(
    readonly spec: KvCacheSpec,
    kernels: CpuKernels,
    own: (b: NativeBuffer) => NativeBuffer,
    prefault: (b: NativeBuffer) => void,
  ) {
    this.layout = {
      type: kvTypeId(spec.dtype),
      nBlocks: spec.nBlocks,
      blockSize: spec.blockSize,
      nKvHeads: spec.nKvHeads,
      headDim: spec.headDim,
    };
    this.bytes = kvCacheBytes(spec);
    const bytes = kvLayoutBytes(this.layout);
    // On huge pages where a layer fills one: attention walks a head's rows a few KiB apart,
    // which on 4 KiB pages costs a page walk every position or two. Backed at load, as
    // llama.cpp clears its cache when it makes a context: a page first touched by a decode
    // step is zeroed by the kernel inside that step. (A small buffer is zeroed when made.)
    const alloc = (): NativeBuffer => {
      if (bytes < HUGE_PAGE_BYTES) return own(kernels.alloc(bytes));
      const b = own(kernels.allocHuge(bytes));
      prefault(b);
      return b;
    };
    this.k = Array.from({ length: spec.nLayers }, alloc);
    this.v = Array.from({ length: spec.nLayers }, alloc);
  }
}
