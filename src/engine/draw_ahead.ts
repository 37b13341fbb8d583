/**
 * A step's sampled draws made together. Every decode run whose token is a plain draw from
 * its own row of logits (a temperature; no bias, penalty or constraint; no draft to verify)
 * has that row drawn over the runner's threads in one call (runner.drawRows) before the
 * step's tokens are handed out in order. Each sampler gives its draw the `u` its stream
 * would give a draw of its own, and each row is drawn exactly as alone, so the tokens are
 * the ones drawing row by row gives (draw_ahead_test). Sixteen streams sampling over a 152k
 * vocabulary drew one after another on the engine's thread for 3-9 ms a step.
 */

import type { ModelRunner } from "../runner/runner.ts";
import { EXP_TABLE } from "./exp_table.ts";
import { NK_SAMPLE_PARAMS } from "../backend/cpu/library.ts";
import type { ScheduledRun } from "./scheduler.ts";
import type { Sequence } from "./sequence.ts";

/** Fewer draws than this go row by row: one gains nothing from the pool. */
const MIN_ROWS = 2;

/**
 * Draws ahead for the plain sampled decode runs among `outputs` (in step order, `rows` output
 * rows each), whose logits are `rows`' rows of `width`; their samplers report the tokens.
 */
export function drawAhead(
  runner: ModelRunner,
  outputs: readonly { run: ScheduledRun; rows: number }[],
  rows: Float32Array,
  width: number,
): void {
  const drawRows = runner.drawRows;
  if (drawRows === undefined) return;
  const picked: Sequence[] = [];
  const which: number[] = [];
  let r = 0;
  for (const { run, rows: n } of outputs) {
    if (n === 1 && run.sample && run.draft.length === 0 && run.seq.drawsPlainly) {
      picked.push(run.seq);
      which.push(r);
    }
    r += n;
  }
  if (picked.length < MIN_ROWS) return;
  const params = new Float64Array(NK_SAMPLE_PARAMS * picked.length);
  picked.forEach((seq, i) => seq.sampler.drawAhead(params, i));
  const ids = drawRows(rows, width, Int32Array.from(which), params, EXP_TABLE);
  picked.forEach((seq, i) => seq.sampler.drawn(ids[i]));
}
