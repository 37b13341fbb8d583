/**
 * Decode speed over a grid of stream counts and context lengths, for tests/gpu/bench.ts:
 * the context is prefilled once (one stream, chunks of CHUNK tokens, timed: prefill speed
 * at that depth), then `steps` decode steps run with every stream in one batch, each
 * stream at the same position behind its own blocks. Streams other than the first read
 * blocks that were never prefilled: the same bytes move whatever the rows hold, and
 * prefilling each stream would spend the run's time budget on prefill.
 *
 * Each point comes with its bandwidth roofline: a step reads the weights once and every
 * stream's KV rows, so streams x bandwidth / (weight bytes + streams x KV bytes per
 * stream) bounds decode tokens/s; prefill is bounded (loosely: it is compute-bound) by
 * the chunk's tokens over one read of the weights.
 */

import type { KvCache, StepLayout } from "../../src/backend/backend.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import type { GgufModel, Model } from "../../src/models/family.ts";

export interface GridPoint {
  streams: number;
  context: number;
  /** Aggregate decode tokens/s (all streams). */
  decodeTokS: number;
  decodeRoofline: number;
  /** Tokens/s filling the context (one stream), 0 for an empty context. */
  prefillTokS: number;
  prefillRoofline: number;
  bytesPerStep: number;
}

export interface GridOptions {
  streams: number[];
  contexts: number[];
  steps: number;
  /** Bytes a decode step reads from the weights (dense, plus the routed experts' share). */
  weightBytes: number;
  bandwidthGBs: number;
}

const BLOCK = 16;
const CHUNK = 2048;

/** KV bytes one stream reads per decode step at `context` (an f16 cache). */
function kvBytes(gguf: GgufModel, context: number): number {
  const s = gguf.shape;
  return 2 * s.nLayers * s.nKvHeads * s.headDim * 2 * context;
}

/**
 * The blocks a sequence of `positions` has, as the engine's tables hold them: attention
 * sizes its work (splits) by the table, so a table as long as the cache would measure the
 * longest context at every one.
 */
function held(table: Int32Array, positions: number): Int32Array {
  return table.subarray(0, Math.ceil(positions / BLOCK));
}

export function decodeGrid(
  gguf: GgufModel,
  model: Model,
  be: CudaBackend,
  o: GridOptions,
): GridPoint[] {
  const maxStreams = Math.max(...o.streams);
  const perStream = Math.ceil((Math.max(...o.contexts) + o.steps + 1) / BLOCK);
  const cache: KvCache = be.createKvCache({
    ...model.kvShape,
    blockSize: BLOCK,
    nBlocks: maxStreams * perStream,
    dtype: "f16",
  });
  const tables = Array.from(
    { length: maxStreams },
    (_, s) => Int32Array.from({ length: perStream }, (_, i) => s * perStream + i),
  );
  const vocab = gguf.shape.vocabSize;
  const bw = o.bandwidthGBs * 1e9;
  const points: GridPoint[] = [];
  for (const context of o.contexts) {
    let prefillSeconds = 0;
    for (let start = 0; start < context; start += CHUNK) {
      const n = Math.min(CHUNK, context - start);
      const layout: StepLayout = {
        positions: Int32Array.from({ length: n }, (_, i) => start + i),
        sequences: [{ rowStart: 0, rowCount: n, blockTable: held(tables[0], start + n) }],
      };
      const ids = Int32Array.from({ length: n }, (_, i) => ((start + i) * 7919 + 13) % vocab);
      const t0 = performance.now();
      be.argmaxRows(model.forward({ ids, layout, logitRows: Int32Array.of(n - 1) }, cache));
      prefillSeconds += (performance.now() - t0) / 1000;
    }
    for (const streams of o.streams) {
      const step = (i: number): number => {
        const layout: StepLayout = {
          positions: new Int32Array(streams).fill(context + i),
          sequences: tables.slice(0, streams).map((table, s) => ({
            rowStart: s,
            rowCount: 1,
            blockTable: held(table, context + i + 1),
          })),
        };
        const ids = Int32Array.from({ length: streams }, (_, s) => (17 + 31 * s + i) % vocab);
        const logitRows = Int32Array.from({ length: streams }, (_, s) => s);
        const t0 = performance.now();
        be.argmaxRows(model.forward({ ids, layout, logitRows }, cache));
        return (performance.now() - t0) / 1000;
      };
      step(0); // the step shape's first sighting: recorded, then captured on the second
      step(1);
      let seconds = 0;
      for (let i = 0; i < o.steps; i++) seconds += step(i);
      const bytesPerStep = o.weightBytes + streams * kvBytes(gguf, context + o.steps / 2);
      points.push({
        streams,
        context,
        decodeTokS: (streams * o.steps) / seconds,
        decodeRoofline: (streams * bw) / bytesPerStep,
        prefillTokS: context > 0 ? context / prefillSeconds : 0,
        prefillRoofline: context > 0 ? (Math.min(CHUNK, context) * bw) / o.weightBytes : 0,
        bytesPerStep,
      });
    }
  }
  return points;
}
