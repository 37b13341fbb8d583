/**
 * KV stores and attention against the reference: GQA, two sequences with scattered block
 * tables in one step (21 rows: the tiled prefill kernel; 5 rows: split-K), a row that
 * belongs to no sequence (left untouched), a prefill step then a decode step over what it
 * stored, f32 and f16 caches, head sizes 64, 128 and 256 (split-K only).
 */

import type { KvCache, StepLayout } from "../../../src/backend/backend.ts";
import type { Both, Pair } from "./pair.ts";

const BOUND = { f32: 2e-5, f16: 4e-3 } as const;

export function checkAttention(pair: Pair): void {
  for (const headDim of [64, 128, 256]) {
    for (const dtype of headDim === 256 ? ["f32"] as const : ["f32", "f16"] as const) {
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

function step(
  pair: Pair,
  cache: Both<KvCache>,
  layer: number,
  layout: StepLayout,
  shape: { nHeads: number; nKvHeads: number; headDim: number; scale: number },
  what: string,
  bound: number,
): void {
  const rows = layout.positions.length;
  const kvCols = shape.nKvHeads * shape.headDim;
  const k = pair.random(rows, kvCols);
  const v = pair.random(rows, kvCols);
  const q = pair.random(rows, shape.nHeads * shape.headDim);
  // Start `out` with known contents: rows of no sequence must keep them.
  const out = pair.random(rows, shape.nHeads * shape.headDim);
  pair.dev.storeKv(cache.dev, layer, k.dev, v.dev, layout);
  pair.ref.storeKv(cache.ref, layer, k.ref, v.ref, layout);
  pair.dev.attention(out.dev, q.dev, cache.dev, layer, layout, shape);
  pair.ref.attention(out.ref, q.ref, cache.ref, layer, layout, shape);
  pair.check(what, out, bound);
}
