/**
 * The cache shapes and chunk sequences attention_test.ts checks kv_store and attention on:
 * group sizes, head widths, block sizes, decode steps deep enough to be split into spans,
 * runs of prefill tokens, and sliding windows.
 */

import { range } from "../../../tests/support/range.ts";

export interface Setup {
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  blockSize: number;
  /** Positions of the chunks stored and attended one after the other. */
  chunks: number[][];
  /** Sliding window (absent: none). */
  window?: number;
}

export const SETUPS: Setup[] = [
  {
    // Deep decode steps of a group of two (one token, two, four: two passes of four rows)
    // go through spans of positions merged afterwards; five tokens go kv head by kv head.
    nHeads: 4,
    nKvHeads: 2,
    headDim: 64,
    blockSize: 16,
    chunks: [range(0, 600), [600], [601, 602], range(603, 607), range(607, 612)],
  },
  {
    nHeads: 3,
    nKvHeads: 3,
    headDim: 32,
    blockSize: 8,
    chunks: [range(0, 500), range(500, 504), [504]],
    window: 300,
  },
  {
    nHeads: 4,
    nKvHeads: 2,
    headDim: 64,
    blockSize: 4,
    chunks: [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9], [10]],
  },
  {
    // Two tokens of a group of four: eight rows per kv head in spans, four at a time.
    nHeads: 8,
    nKvHeads: 2,
    headDim: 128,
    blockSize: 16,
    chunks: [range(0, 150), [150], [151], [152, 153]],
  },
  {
    nHeads: 2,
    nKvHeads: 2,
    headDim: 32,
    blockSize: 8,
    chunks: [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11, 12]],
  },
  {
    // Runs of 32 tokens: 5 + 20 + 70 (32, 32, 6) from positions 0, 5 and 25.
    nHeads: 4,
    nKvHeads: 2,
    headDim: 64,
    blockSize: 4,
    chunks: [[0, 1, 2, 3, 4], range(5, 25), range(25, 95), [96, 95, 97], [98]],
  },
  {
    // A group of 20 heads: 3 tokens per item, fewer rows than one item's usual 64.
    nHeads: 20,
    nKvHeads: 1,
    headDim: 32,
    blockSize: 16,
    chunks: [range(0, 3), range(3, 70), [70]],
  },
  {
    nHeads: 4,
    nKvHeads: 2,
    headDim: 64,
    blockSize: 4,
    chunks: [range(0, 13), [13], [14], range(15, 40)],
    window: 5,
  },
  {
    nHeads: 8,
    nKvHeads: 2,
    headDim: 128,
    blockSize: 16,
    chunks: [range(0, 150), [150], range(151, 230)],
    window: 70,
  },
  {
    nHeads: 2,
    nKvHeads: 1,
    headDim: 32,
    blockSize: 8,
    chunks: [range(0, 9), [9]],
    window: 1,
  },
  {
    // Qwen3-0.6B's shape: decode steps of one token and of two over spans that are merged.
    nHeads: 16,
    nKvHeads: 8,
    headDim: 128,
    blockSize: 16,
    chunks: [range(0, 400), [400], [401, 402], [403]],
  },
  {
    // Qwen3-8B's groups of four, and a window that cuts a tile.
    nHeads: 32,
    nKvHeads: 8,
    headDim: 64,
    blockSize: 16,
    chunks: [range(0, 200), [200], [201]],
    window: 77,
  },
  {
    // Groups of one, and a tail tile of three positions.
    nHeads: 16,
    nKvHeads: 16,
    headDim: 64,
    blockSize: 8,
    chunks: [range(0, 138), [138]],
  },
];
