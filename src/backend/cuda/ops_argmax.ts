/**
 * Recording greedy decoding's argmax (kernels/cuda/elementwise.cu): plain, or under the
 * token masks of constrained rows. Masks travel in the step arena (each row's offset there,
 * then the bitsets of the masked rows), sent with the step's other integers by the one
 * upload before the step runs, in the same stream: no copy of their own, no wait.
 */

import type { CudaContext } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import type { CudaActivation } from "./resources.ts";

/** Columns per part of a row below which fewer parts are launched, and the most parts. */
const ARGMAX_SPAN_MIN = 1024;
const ARGMAX_PARTS_MAX = 64;

/**
 * Launches the argmax of each row of `x` (argmax_part over parts of every row in parallel,
 * then argmax_final); returns the device address of the picks.
 */
export function recordArgmax(
  ctx: CudaContext,
  x: CudaActivation,
  masks: readonly (Uint32Array | null)[] | undefined,
): number {
  const parts = Math.max(1, Math.min(ARGMAX_PARTS_MAX, Math.ceil(x.cols / ARGMAX_SPAN_MIN)));
  const span = Math.ceil(x.cols / parts);
  // Before the arena is reserved: growing a scratch buffer flushes what was recorded.
  const ids = ctx.scratch("argmax", 4 * x.rows);
  const pv = ctx.scratch("argmax_part_values", 4 * x.rows * parts);
  const pi = ctx.scratch("argmax_part_columns", 4 * x.rows * parts);
  const table = masks === undefined || masks.every((m) => m === null)
    ? 0
    : putMasks(ctx, masks, x.rows, x.cols);
  const tape = ctx.runner.tape;
  tape.launch(ctx.k("argmax_part"), parts, x.rows, 1, 256)
    .p(pv).p(pi).p(x.ptr).opt(table).i(x.rows).i(x.cols).i(span).end();
  tape.launch(ctx.k("argmax_final"), x.rows, 1, 1, ARGMAX_PARTS_MAX)
    .p(ids).p(pv).p(pi).opt(table).i(x.rows).i(x.cols).i(parts).end();
  return ids;
}

/** Each row's bitset offset in words (-1: unmasked), then the masked rows' bitsets. */
function putMasks(
  ctx: CudaContext,
  masks: readonly (Uint32Array | null)[],
  rows: number,
  cols: number,
): number {
  const words = Math.ceil(cols / 32);
  if (masks.length !== rows || masks.some((m) => m !== null && m.length < words)) {
    throw invalidArgument(
      "argmaxRows",
      `${masks.length} masks for ${rows} rows, each of ${words} words at least`,
    );
  }
  const n = rows + words * masks.filter((m) => m !== null).length;
  ctx.reserveArena(4 * n + 64);
  return ctx.arena.fill(n, (view) => {
    let at = rows;
    masks.forEach((m, r) => {
      if (m === null) {
        view[r] = -1;
        return;
      }
      view[r] = at;
      view.set(new Int32Array(m.buffer, m.byteOffset, words), at);
      at += words;
    });
  });
}
