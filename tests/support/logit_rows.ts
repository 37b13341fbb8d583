/**
 * Rows of logits that sampling tests draw from: flat, peaked, full of ties, and wide (past
 * any cutoff, with a NaN among them).
 */

import type { Rng } from "../../src/gguf/mod.ts";
import { NK_SAMPLE_PARAMS } from "../../src/backend/cpu/library.ts";
import { packDraw } from "../../src/engine/native_sampling.ts";
import type { DrawParams } from "../../src/engine/truncation.ts";

export type LogitRow = (rng: Rng, n: number) => Float32Array;

export const LOGIT_ROWS: Record<string, LogitRow> = {
  flat: (rng, n) => Float32Array.from({ length: n }, () => rng.float() * 4 - 2),
  peaked: (rng, n) =>
    Float32Array.from({ length: n }, (_, i) => (rng.float() - 0.5) * 16 + (i % 97 === 3 ? 20 : 0)),
  // Few distinct values: ties everywhere, at every cut.
  ties: (rng, n) => Float32Array.from({ length: n }, () => Math.floor(rng.float() * 6) * 0.75),
  // Values spread past the cutoff, and a NaN (never a candidate).
  wide: (rng, n) => {
    const x = Float32Array.from({ length: n }, () => (rng.float() - 0.5) * 120);
    x[Math.floor(rng.float() * n)] = NaN;
    return x;
  },
};

/** Draws' parameters as drawRows reads them, draw i's at [NK_SAMPLE_PARAMS i, ...). */
export function packDraws(draws: readonly DrawParams[]): Float64Array {
  const params = new Float64Array(NK_SAMPLE_PARAMS * draws.length);
  draws.forEach((d, i) => packDraw(d, params, i));
  return params;
}
