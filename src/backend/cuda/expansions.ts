/**
 * f16 copies of quantized weights for cuBLAS prefill, kept across steps within a byte
 * budget. Without one, every prefill step (every chunk of a long prompt) expands each
 * weight it multiplies again: for a Q4_K weight that is 0.56 bytes read and 2 written per
 * value before the GEMM reads the 2 again, about 2.3 times the GEMM's own weight traffic.
 * With the copy a later step reads 2 bytes per value and expands nothing.
 *
 * Weights are taken first come until the budget is spent, never evicted: a prefill step
 * walks every layer in the same order, so least-recently-used eviction under a budget
 * smaller than the model would evict each copy just before its next use and never hit,
 * while keeping the first ones hits on that share of the weights every step. A copy dies
 * with the backend, as the weights do. Qwen3-8B's GEMM weights (every layer's q, k, v, o,
 * gate, up and down: 6.95e9 values) take 13.9 GB as f16, within the default budget on an
 * H200 (an eighth of its 141 GB).
 */

import { CudaError } from "./errors.ts";
import type { DeviceMemory } from "./memory.ts";

/** The default budget: this share of the device's memory. */
export const EXPANSION_SHARE = 1 / 8;

export class WeightExpansions {
  readonly #memory: DeviceMemory;
  readonly #copies = new Map<number, number>();
  #budget: number;
  #used = 0;

  constructor(memory: DeviceMemory, budget: number) {
    this.#memory = memory;
    this.#budget = budget;
  }

  /** Bytes held by the copies. */
  get bytes(): number {
    return this.#used;
  }

  /** The copy of the weight at `ptr`, or null when there is none yet. */
  get(ptr: number): number | null {
    return this.#copies.get(ptr) ?? null;
  }

  /**
   * Room for a copy of `bytes` for the weight at `ptr` (the caller fills it), or null when
   * the budget, or the device, has no room: the caller then expands a tile at a time.
   */
  reserve(ptr: number, bytes: number): number | null {
    if (this.#used + bytes > this.#budget) return null;
    let copy: number;
    try {
      copy = this.#memory.alloc(bytes, "weights");
    } catch (err) {
      if (!(err instanceof CudaError) || err.code !== "cuda_out_of_memory") throw err;
      // The device is fuller than the budget assumed: keep what is held, take no more.
      this.#budget = this.#used;
      return null;
    }
    this.#copies.set(ptr, copy);
    this.#used += bytes;
    return copy;
  }
}
