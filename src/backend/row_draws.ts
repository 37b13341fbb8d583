/**
 * What a backend with host threads of its own (the CPU's pool) adds: sampled draws from
 * rows of logits already on the host, several rows at once over those threads. A batched
 * decode step draws every sampled sequence's token this way instead of one row after
 * another on the engine's thread.
 */

import type { Backend } from "./backend.ts";

export interface RowDraws {
  /**
   * The token of each row `which[i]` of `rows` (`width` logits each), drawn with the
   * parameters at params[6 i, 6 i + 6) (temperature, cutoff, top-k, top-p, min-p, u) by the
   * exp table `table`, exactly as one draw of that row alone (nk_sample_draw); -1 where a
   * row has no candidate.
   */
  drawRows(
    rows: Float32Array,
    width: number,
    which: Int32Array,
    params: Float64Array,
    table: Float64Array,
  ): Int32Array;
}

/** The backend's row draws, or null where it has no host threads to spread them over. */
export function rowDrawsOf(backend: Backend): RowDraws | null {
  const b = backend as Backend & Partial<RowDraws>;
  return typeof b.drawRows === "function" ? b as Backend & RowDraws : null;
}
