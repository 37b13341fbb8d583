/**
 * Bookkeeping for the paged KV cache: which blocks of the pool are free, and which
 * blocks each sequence holds. The cache memory itself belongs to the backend; this only
 * hands out block indices. A sequence reserves its worst case (prompt + max new tokens)
 * up front, so a step can never run out of cache halfway.
 */

import { NeuronError } from "../common/errors.ts";

export class KvBlocks {
  readonly #free: number[];
  readonly blockSize: number;
  readonly nBlocks: number;

  constructor(nBlocks: number, blockSize: number) {
    this.nBlocks = nBlocks;
    this.blockSize = blockSize;
    // Popped from the end: hand out low indices first (touches less memory when idle).
    this.#free = Array.from({ length: nBlocks }, (_, i) => nBlocks - 1 - i);
  }

  get freeBlocks(): number {
    return this.#free.length;
  }

  get usedBlocks(): number {
    return this.nBlocks - this.#free.length;
  }

  /** Blocks needed to hold `tokens` positions. */
  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSize);
  }

  /** Whether `tokens` positions could ever fit (the whole pool is that large). */
  fitsInPool(tokens: number): boolean {
    return this.blocksFor(tokens) <= this.nBlocks;
  }

  /** Reserves blocks for `tokens` positions, or returns null when too few are free. */
  allocate(tokens: number): Int32Array | null {
    const n = this.blocksFor(tokens);
    if (n > this.#free.length) return null;
    const table = new Int32Array(n);
    for (let i = 0; i < n; i++) table[i] = this.#free.pop()!;
    return table;
  }

  /** Returns a sequence's blocks to the pool. */
  release(table: Int32Array): void {
    for (const b of table) {
      if (b < 0 || b >= this.nBlocks) {
        throw new NeuronError("kv_block_invalid", `block ${b} is not in the pool`);
      }
      this.#free.push(b);
    }
    if (this.#free.length > this.nBlocks) {
      throw new NeuronError("kv_block_double_free", "more blocks returned than the pool holds");
    }
  }
}
