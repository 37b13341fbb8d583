/**
 * Mixture-of-experts routing of one token, in the order of operations of llama.cpp's
 * build_moe_ffn (softmax gating) on ggml's CPU ops: soft_max (the max, expf of each score
 * less it in f32, their sum in f64, then every value times the f32 of 1/sum), a
 * descending argsort by std::sort of which the first k are the chosen experts, get_rows of
 * their probabilities, and with normalisation sum_rows (in f64, rounded to f32), clamp to
 * at least 2^-14 and an f32 division. `Math.fround` marks every f32 rounding.
 */

import { stdSort } from "./std_sort.ts";

/** 2^-14, the smallest normal f16: llama.cpp's floor for the sum of the chosen weights. */
export const WEIGHT_SUM_FLOOR = 6.103515625e-5;

/**
 * Routes one token: writes the `ids.length` chosen experts of `logits` (one score per
 * expert) into `ids`, best first as ggml's argsort leaves them, and their weights into
 * `weights`.
 */
export function routeToken(
  logits: Float32Array,
  normalize: boolean,
  ids: Int32Array,
  weights: Float32Array,
): void {
  const n = logits.length;
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = max > logits[i] ? max : logits[i];
  const p = new Float32Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    p[i] = Math.exp(Math.fround(logits[i] - max));
    sum += p[i];
  }
  const inv = Math.fround(1 / sum);
  for (let i = 0; i < n; i++) p[i] = Math.fround(p[i] * inv);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  stdSort(order, (a, b) => p[a] > p[b]);
  const k = ids.length;
  let chosen = 0;
  for (let j = 0; j < k; j++) {
    ids[j] = order[j];
    weights[j] = p[order[j]];
    chosen += weights[j];
  }
  if (!normalize) return;
  const denom = Math.max(Math.fround(chosen), WEIGHT_SUM_FLOOR);
  for (let j = 0; j < k; j++) weights[j] = Math.fround(weights[j] / denom);
}

/** sum_j weights[j] · rows[j][c] per column c, f32 products added in j order. */
export function combineToken(
  out: Float32Array,
  rows: Float32Array,
  weights: Float32Array,
): void {
  const cols = out.length;
  for (let c = 0; c < cols; c++) {
    let acc = Math.fround(weights[0] * rows[c]);
    for (let j = 1; j < weights.length; j++) {
      acc = Math.fround(acc + Math.fround(weights[j] * rows[j * cols + c]));
    }
    out[c] = acc;
  }
}
