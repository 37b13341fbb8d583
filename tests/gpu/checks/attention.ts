/**
 * KV stores and attention against the reference: GQA, two sequences with scattered block
 * tables in one step (21 rows: the tiled prefill kernel; 5 rows: split-K), a row that
 * belongs to no sequence (left untouched), a prefill step then a decode step over what it
 * stored, f32, f16, q8_0 and q4_0 caches, head sizes 64, 128 and 256 (split-K only). Then
 * sliding windows (Gemma 3's local layers) on both kernels: narrower than a 32-position
 * prefill tile and a 16-slot block, wider than both, wider than a 128-position split, and
 * wider than the sequence.
 *
 * A quantized cache holds the same blocks on every backend (ggml's reference quantizers),
 * and each reads back the values they stand for: its attention agrees as closely as an f32
 * cache's. An f16 cache the reference keeps in f32.
 */

import type { AttentionShape, KvCache, KvDType, StepLayout } from "../../../src/backend/backend.ts";
import type { Both, Pair } from "./pair.ts";
import { range } from "../../support/range.ts";

const BOUND: Record<KvDType, number> = { f32: 2e-5, f16: 4e-3, q8_0: 2e-5, q4_0: 2e-5 };

/** The cache types checked at each head size (256: the split kernel only). */
const ATTENTION_TYPES: ReadonlyArray<[number, readonly KvDType[]]> = [
  [64, ["f32", "f16", "q8_0", "q4_0"]],
  [128, ["f32", "f16", "q8_0", "q4_0"]],
  [256, ["f32", "q4_0"]],
];

/** Checks the cache types of ATTENTION_TYPES that `only` names (default all). */
export function checkAttention(pair: Pair, only?: readonly KvDType[]): void {
  for (const [headDim, types] of ATTENTION_TYPES) {
    for (const dtype of types.filter((t) => only === undefined || only.includes(t))) {
      const spec = { nLayers: 2, nKvHeads: 2, headDim, blockSize: 16, nBlocks: 12, dtype };
      const cache: Both<KvCache> = {
        dev: pair.dev.createKvCache(spec),
        ref: pair.ref.createKvCache(spec),
      };
      const shape = { nHeads: 6, nKvHeads: 2, headDim, scale: 1 / Math.sqrt(headDim) };
      const tables = [Int32Array.from([7, 2, 9]), Int32Array.from([4, 0])];
      // Prefill: 21 rows of sequence 0, 5 of sequence 1, then one stray row.
      const prefill: StepLayout = {
        positions: Int32Array.from([...Array(21).keys(), ...Array(5).keys(), 0]),
        sequences: [
          { rowStart: 0, rowCount: 21, blockTable: tables[0] },
          { rowStart: 21, rowCount: 5, blockTable: tables[1] },
        ],
      };
      step(
        pair,
        cache,
        1,
        prefill,
        shape,
        `attention prefill ${dtype} head ${headDim}`,
        BOUND[dtype],
      );
      // Decode: one row each, sequence 1 first this time.
      const decode: StepLayout = {
        positions: Int32Array.from([5, 21]),
        sequences: [
          { rowStart: 0, rowCount: 1, blockTable: tables[1] },
          { rowStart: 1, rowCount: 1, blockTable: tables[0] },
        ],
      };
      step(
        pair,
        cache,
        1,
        decode,
        shape,
        `attention decode ${dtype} head ${headDim}`,
        BOUND[dtype],
      );
    }
  }
}

/** Windowed cases: head size, cache type, window. */
const WINDOWS: ReadonlyArray<[number, KvDType, number]> = [
  [64, "f32", 1],
  [64, "f16", 5],
  [128, "f32", 20],
  [128, "f16", 40],
  [64, "q8_0", 40],
  [64, "f32", 150],
  [128, "q4_0", 150],
  [256, "f32", 24],
  [128, "f32", 1000],
];

/**
 * A sequence (blocks scattered over the pool) prefilled in two chunks of more than 32 rows
 * beside a short one of 5-row chunks, then 180 more positions stored, then decoded beside
 * the short one and a row of no sequence: every row checked, under each window of WINDOWS
 * whose cache type `only` names (default all).
 */
export function checkWindowedAttention(pair: Pair, only?: readonly KvDType[]): void {
  for (const [headDim, dtype, window] of WINDOWS) {
    if (only !== undefined && !only.includes(dtype)) continue;
    const spec = { nLayers: 1, nKvHeads: 2, headDim, blockSize: 16, nBlocks: 24, dtype };
    const cache: Both<KvCache> = {
      dev: pair.dev.createKvCache(spec),
      ref: pair.ref.createKvCache(spec),
    };
    const shape = { nHeads: 6, nKvHeads: 2, headDim, scale: 1 / Math.sqrt(headDim), window };
    const long = Int32Array.from([23, 5, 17, 2, 11, 8, 20, 0, 14, 3, 9, 21, 6, 18, 1, 12, 15]);
    const short = Int32Array.from([4, 22]);
    const what = `attention window ${window} ${dtype} head ${headDim}`;
    // The second chunk's rows come from both ends in turn: a prefill block's rows then span
    // more than a tile, so some skip tiles none of their positions is in.
    const chunk = (from: number, to: number, at: number, order = (p: number[]) => p) => ({
      positions: Int32Array.from([...order(range(from, to)), ...range(at, at + 5)]),
      sequences: [
        { rowStart: 0, rowCount: to - from, blockTable: long },
        { rowStart: to - from, rowCount: 5, blockTable: short },
      ],
    });
    step(pair, cache, 0, chunk(0, 40, 0), shape, `${what} prefill`, BOUND[dtype]);
    step(
      pair,
      cache,
      0,
      chunk(40, 76, 5, fromBothEnds),
      shape,
      `${what} second chunk`,
      BOUND[dtype],
    );
    store(pair, cache, 0, {
      positions: Int32Array.from(range(76, 256)),
      sequences: [{ rowStart: 0, rowCount: 180, blockTable: long }],
    }, shape);
    const decode: StepLayout = {
      positions: Int32Array.from([10, 256, 3]),
      sequences: [
        { rowStart: 0, rowCount: 1, blockTable: short },
        { rowStart: 1, rowCount: 1, blockTable: long },
      ],
    };
    step(pair, cache, 0, decode, shape, `${what} decode`, BOUND[dtype]);
  }
}

/** p's values from both ends in turn: first, last, second, second to last, ... */
function fromBothEnds(p: number[]): number[] {
  const out: number[] = [];
  for (let i = 0, j = p.length - 1; i <= j; i++, j--) {
    out.push(p[i]);
    if (j > i) out.push(p[j]);
  }
  return out;
}

/** Stores random K and V rows at the layout's positions on both backends. */
function store(
  pair: Pair,
  cache: Both<KvCache>,
  layer: number,
  layout: StepLayout,
  shape: AttentionShape,
): void {
  const rows = layout.positions.length;
  const kvCols = shape.nKvHeads * shape.headDim;
  const k = pair.random(rows, kvCols);
  const v = pair.random(rows, kvCols);
  pair.dev.storeKv(cache.dev, layer, k.dev, v.dev, layout);
  pair.ref.storeKv(cache.ref, layer, k.ref, v.ref, layout);
}

function step(
  pair: Pair,
  cache: Both<KvCache>,
  layer: number,
  layout: StepLayout,
  shape: AttentionShape,
  what: string,
  bound: number,
): void {
  const rows = layout.positions.length;
  const q = pair.random(rows, shape.nHeads * shape.headDim);
  // Start `out` with known contents: rows of no sequence must keep them.
  const out = pair.random(rows, shape.nHeads * shape.headDim);
  store(pair, cache, layer, layout, shape);
  pair.dev.attention(out.dev, q.dev, cache.dev, layer, layout, shape);
  pair.ref.attention(out.ref, q.ref, cache.ref, layer, layout, shape);
  pair.check(what, out, bound);
}
