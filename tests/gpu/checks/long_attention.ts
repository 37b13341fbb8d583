/**
 * Decode attention over long caches against the reference: a pool of 4k or 16k positions,
 * three sequences of very different lengths (the longest filling the pool, their blocks
 * shuffled over it) decoded in one step beside a row of no sequence, one of them with two
 * rows (a speculative run), GQA 4:1 (Qwen3-8B's), 2:1 or 12:1 at Qwen3-8B's head size of 128, on
 * f16 and q8_0 caches, with and without a sliding window. Few heads keep an emulated run
 * cheap; the positions are what the decode kernel's splits, tiles and table loads see.
 */

import type { AttentionShape, KvCache, KvDType, StepLayout } from "../../../src/backend/backend.ts";
import type { Both, Pair } from "./pair.ts";

export interface LongDecodeCase {
  /** Positions the pool holds, and the longest sequence's length. */
  positions: number;
  dtype: KvDType;
  nHeads: number;
  nKvHeads: number;
  window?: number;
}

export const LONG_DECODE_CASES: readonly LongDecodeCase[] = [
  { positions: 4096, dtype: "f16", nHeads: 4, nKvHeads: 1 },
  { positions: 4096, dtype: "q8_0", nHeads: 2, nKvHeads: 1, window: 1000 },
  { positions: 16384, dtype: "q8_0", nHeads: 4, nKvHeads: 1 },
  { positions: 16384, dtype: "f16", nHeads: 2, nKvHeads: 1, window: 3000 },
  // A group wider than one block's 8 query heads: blocks of 8 and 4.
  { positions: 4096, dtype: "q8_0", nHeads: 12, nKvHeads: 1 },
];

const HEAD_DIM = 128;
const BLOCK = 16;
/** As checkAttention's: a q8_0 cache holds the same blocks on both sides; f16 is f32 there. */
const BOUND: Partial<Record<KvDType, number>> = { f16: 4e-3, q8_0: 2e-5 };

export function describeLongDecode(c: LongDecodeCase): string {
  const window = c.window === undefined ? "" : `, window ${c.window}`;
  return `decode attention at ${c.positions} positions, ${c.dtype}, ` +
    `GQA ${c.nHeads / c.nKvHeads}:1${window}`;
}

export function checkLongDecode(pair: Pair, c: LongDecodeCase): void {
  const lengths = [c.positions, 1000 + 37, 45];
  const blocksOf = (n: number): number => Math.ceil(n / BLOCK);
  const nBlocks = lengths.reduce((n, l) => n + blocksOf(l), 0);
  const spec = { nLayers: 1, nKvHeads: c.nKvHeads, headDim: HEAD_DIM, blockSize: BLOCK, nBlocks };
  const cache: Both<KvCache> = {
    dev: pair.dev.createKvCache({ ...spec, dtype: c.dtype }),
    ref: pair.ref.createKvCache({ ...spec, dtype: c.dtype }),
  };
  const shape: AttentionShape = {
    nHeads: c.nHeads,
    nKvHeads: c.nKvHeads,
    headDim: HEAD_DIM,
    scale: 1 / Math.sqrt(HEAD_DIM),
    window: c.window,
  };
  const pool = shuffled(pair, nBlocks);
  let next = 0;
  const tables = lengths.map((l) => {
    next += blocksOf(l);
    return Int32Array.from(pool.slice(next - blocksOf(l), next));
  });
  // The decode step: sequence 1's last position, sequence 0's last two, a row of no
  // sequence, sequence 2's last position.
  const decode: StepLayout = {
    positions: Int32Array.from([lengths[1] - 1, lengths[0] - 2, lengths[0] - 1, 0, lengths[2] - 1]),
    sequences: [
      { rowStart: 0, rowCount: 1, blockTable: tables[1] },
      { rowStart: 1, rowCount: 2, blockTable: tables[0] },
      { rowStart: 4, rowCount: 1, blockTable: tables[2] },
    ],
  };
  const before = [lengths[0] - 2, lengths[1] - 1, lengths[2] - 1];
  before.forEach((n, s) => {
    const layout = {
      positions: Int32Array.from({ length: n }, (_, i) => i),
      sequences: [{ rowStart: 0, rowCount: n, blockTable: tables[s] }],
    };
    store(pair, cache, layout, shape);
  });
  store(pair, cache, decode, shape);
  const rows = decode.positions.length;
  const q = pair.random(rows, c.nHeads * HEAD_DIM);
  const out = pair.random(rows, c.nHeads * HEAD_DIM);
  pair.dev.attention(out.dev, q.dev, cache.dev, 0, decode, shape);
  pair.ref.attention(out.ref, q.ref, cache.ref, 0, decode, shape);
  pair.check(describeLongDecode(c), out, BOUND[c.dtype]!);
}

/** Random K and V rows at the layout's positions, on both backends. */
function store(pair: Pair, cache: Both<KvCache>, layout: StepLayout, shape: AttentionShape): void {
  const rows = layout.positions.length;
  const k = pair.random(rows, shape.nKvHeads * shape.headDim);
  const v = pair.random(rows, shape.nKvHeads * shape.headDim);
  pair.dev.storeKv(cache.dev, 0, k.dev, v.dev, layout);
  pair.ref.storeKv(cache.ref, 0, k.ref, v.ref, layout);
}

/** 0..n-1 in a random order. */
function shuffled(pair: Pair, n: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = pair.rng.int(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}
