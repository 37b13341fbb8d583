/**
 * The candidates of one sampled draw and the truncations that narrow them (top-k, top-p,
 * min-p), without sorting the vocabulary. Ranking is by logit, ties to the lower token id,
 * as a sort would give it; but a sort of every candidate costs 60-100 ms per token for a
 * 152k vocabulary where the distribution is flat, which is what random weights give and
 * what a real model gives at an uncertain position. Top-k and top-p are one selection
 * (`keepBest`): bucket the undecided candidates by logit, keep the best buckets whole while
 * they hold less than what is still needed, and go on into the bucket that crosses it; a
 * pass or two over the vocabulary, where a quickselect's branchy partitions took 3-4 passes
 * (top-p at 0.95 over 152k flat logits: 3.6 ms a draw, most of a 16-stream step's time).
 * Min-p is a threshold. Candidates stay in token order, and the draw walks them in that
 * order.
 */

import { argmax } from "../common/argmax.ts";
import { expNeg } from "./exp_table.ts";

/** The tokens still in the running, in token order, with their unnormalised weights. */
export interface Candidates {
  n: number;
  ids: Int32Array;
  logits: Float32Array;
  /**
   * exp((logit - max) / temperature): the best candidate weighs 1. Filled on first use
   * (`weighted`), so that top-k, which ranks by logit, spares the exponentials of the
   * candidates it drops.
   */
  weights: Float64Array;
  weighted: boolean;
  max: number;
  temperature: number;
}

/** Buckets per round of `keepBest`: each round narrows the undecided logits' span this much. */
const BUCKETS = 2048;

/** Shared by every draw (sampling runs on one thread, one draw at a time), grown together
 * to the vocabulary by `candidates`: the candidates, and the truncations' scratch. */
let shared: Candidates = {
  n: 0,
  ids: new Int32Array(0),
  logits: new Float32Array(0),
  weights: new Float64Array(0),
  weighted: false,
  max: 0,
  temperature: 1,
};
let undecided = new Int32Array(0);
let bucketOf = new Uint16Array(0);
let keep = new Uint8Array(0);
const bucketAmount = new Float64Array(BUCKETS);

/**
 * Every token within `cutoff` of the best logit `max` (in tempered units: the rest carry
 * less than e^-cutoff of the mass each), in token order. The answer is overwritten by the
 * next call.
 */
export function candidates(
  x: Float32Array,
  max: number,
  temperature: number,
  cutoff: number,
): Candidates {
  const size = x.length;
  if (shared.ids.length < size) {
    shared = {
      ...shared,
      ids: new Int32Array(size),
      logits: new Float32Array(size),
      weights: new Float64Array(size),
    };
    undecided = new Int32Array(size);
    bucketOf = new Uint16Array(size);
    keep = new Uint8Array(size);
  }
  const c = shared;
  const floor = max - cutoff * temperature;
  let n = 0;
  for (let i = 0; i < x.length; i++) {
    // NaN is no candidate.
    if (!(x[i] >= floor)) continue;
    c.ids[n] = i;
    c.logits[n] = x[i];
    n++;
  }
  c.n = n;
  c.weighted = false;
  c.max = max;
  c.temperature = temperature;
  return c;
}

function weigh(c: Candidates): void {
  if (c.weighted) return;
  const inverse = 1 / c.temperature;
  for (let j = 0; j < c.n; j++) c.weights[j] = expNeg((c.max - c.logits[j]) * inverse);
  c.weighted = true;
}

/**
 * The sum of w[0, n) in four running sums (element j into sum j % 4), then paired: four
 * chains of additions where one waits on each, in an order kernels/cpu/sample.c repeats
 * exactly.
 */
export function sum4(w: Float64Array, n: number): number {
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += w[j];
    s1 += w[j + 1];
    s2 += w[j + 2];
    s3 += w[j + 3];
  }
  if (j < n) s0 += w[j++];
  if (j < n) s1 += w[j++];
  if (j < n) s2 += w[j];
  return (s0 + s1) + (s2 + s3);
}

/** Keeps the candidates whose `keep` flag is set, in their order. */
function compact(c: Candidates): void {
  let n = 0;
  for (let j = 0; j < c.n; j++) {
    if (!keep[j]) continue;
    c.ids[n] = c.ids[j];
    c.logits[n] = c.logits[j];
    if (c.weighted) c.weights[n] = c.weights[j];
    n++;
  }
  c.n = n;
}

/**
 * Flags in `keep` the fewest best candidates (by logit, ties in id order) whose amounts
 * (`weights`, or 1 each when null) add up to `need`. Each round buckets the undecided
 * candidates (undecided[0, m), in id order) evenly over their span of logits, best first,
 * keeps the buckets before the one where the running amount reaches what is still needed,
 * and narrows the undecided to that bucket. Candidates of one logit are kept in id order.
 */
function keepBest(c: Candidates, need: number, weights: Float64Array | null): void {
  keep.fill(0, 0, c.n);
  const x = c.logits;
  let m = c.n;
  for (let j = 0; j < m; j++) undecided[j] = j;
  while (m > 0 && need > 0) {
    let hi = -Infinity, lo = Infinity;
    for (let j = 0; j < m; j++) {
      const v = x[undecided[j]];
      if (v > hi) hi = v;
      if (v < lo) lo = v;
    }
    if (hi === lo) {
      for (let j = 0; j < m && need > 0; j++) {
        keep[undecided[j]] = 1;
        need -= weights ? weights[undecided[j]] : 1;
      }
      return;
    }
    const scale = BUCKETS / (hi - lo);
    bucketAmount.fill(0);
    for (let j = 0; j < m; j++) {
      const at = undecided[j];
      // The lowest logit lands on BUCKETS: folded into the last bucket.
      const b = Math.min(BUCKETS - 1, Math.floor((hi - x[at]) * scale));
      bucketOf[j] = b;
      bucketAmount[b] += weights ? weights[at] : 1;
    }
    let target = 0;
    while (target < BUCKETS && bucketAmount[target] < need) need -= bucketAmount[target++];
    let next = 0;
    for (let j = 0; j < m; j++) {
      const b = bucketOf[j];
      if (b < target) keep[undecided[j]] = 1;
      else if (b === target) undecided[next++] = undecided[j];
    }
    m = next;
  }
}

/** The k best candidates (ties at the k-th logit: the lower ids). */
export function keepTopK(c: Candidates, k: number): void {
  if (k <= 0 || k >= c.n) return;
  keepBest(c, k, null);
  compact(c);
}

/** The fewest best candidates holding at least `p` of the mass. */
export function keepTopP(c: Candidates, p: number): void {
  if (p >= 1 || c.n <= 1) return;
  weigh(c);
  keepBest(c, p * sum4(c.weights, c.n), c.weights);
  compact(c);
}

/** The candidates whose weight is at least `minP` of the best one's. */
export function keepMinP(c: Candidates, minP: number): void {
  if (minP <= 0 || c.n <= 1) return;
  weigh(c);
  let best = 0;
  for (let j = 0; j < c.n; j++) best = Math.max(best, c.weights[j]);
  const threshold = minP * best;
  for (let j = 0; j < c.n; j++) keep[j] = c.weights[j] >= threshold ? 1 : 0;
  compact(c);
}

/** The parameters of one draw (`draw`). */
export interface DrawParams {
  temperature: number;
  /** In tempered units below max: the candidates' floor. */
  cutoff: number;
  /** 0 = off. */
  topK: number;
  /** 1 = off. */
  topP: number;
  /** 0 = off. */
  minP: number;
  /** Uniform in [0, 1): where the draw lands. */
  u: number;
}

/**
 * A whole draw from logits `x`: candidates measured from the best logit, top-k, top-p,
 * min-p, the token `u` lands on.
 */
export function draw(x: Float32Array, p: DrawParams): number {
  const c = candidates(x, x[argmax(x)], p.temperature, p.cutoff);
  keepTopK(c, p.topK);
  keepTopP(c, p.topP);
  keepMinP(c, p.minP);
  return drawFrom(c, p.u);
}

/**
 * The candidate that `u` (uniform in [0, 1)) lands on, walking the weights in id order;
 * -1 when there is none (every logit NaN).
 */
export function drawFrom(c: Candidates, u: number): number {
  weigh(c);
  let r = u * sum4(c.weights, c.n);
  for (let j = 0; j < c.n; j++) {
    r -= c.weights[j];
    if (r < 0) return c.ids[j];
  }
  return c.n > 0 ? c.ids[c.n - 1] : -1;
}
