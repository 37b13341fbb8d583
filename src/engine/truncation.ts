/**
 * The candidates of one sampled draw and the truncations that narrow them (top-k, top-p,
 * min-p), without sorting the vocabulary. Ranking is by logit, ties to the lower token id,
 * as a sort would give it; but a sort of every candidate costs 60-100 ms per token for a
 * 152k vocabulary where the distribution is flat, which is what random weights give and
 * what a real model gives at an uncertain position. Top-k takes a quickselect, top-p a
 * quickselect by mass, min-p a threshold: each O(candidates). Candidates stay in token
 * order, and the draw walks them in that order.
 */

import { expNeg } from "./exp_table.ts";

/** The tokens still in the running, in token order, with their unnormalised weights. */
export interface Candidates {
  n: number;
  ids: Int32Array;
  logits: Float32Array;
  /** exp((logit - max) / temperature): the best candidate weighs 1. */
  weights: Float64Array;
}

/** Shared by every draw (sampling runs on one thread, one draw at a time), grown together
 * to the vocabulary by `candidates`: the candidates, and the truncations' scratch. */
let shared: Candidates = {
  n: 0,
  ids: new Int32Array(0),
  logits: new Float32Array(0),
  weights: new Float64Array(0),
};
let work = new Int32Array(0);
let values = new Float32Array(0);
let keep = new Uint8Array(0);

/**
 * Every token within `cutoff` of the best logit `max` (in tempered units: the rest carry
 * less than e^-cutoff of the mass each), with its weight, in token order. The answer is
 * overwritten by the next call.
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
      n: 0,
      ids: new Int32Array(size),
      logits: new Float32Array(size),
      weights: new Float64Array(size),
    };
    work = new Int32Array(size);
    values = new Float32Array(size);
    keep = new Uint8Array(size);
  }
  const c = shared;
  const floor = max - cutoff * temperature;
  const inverse = 1 / temperature;
  let n = 0;
  for (let i = 0; i < x.length; i++) {
    // NaN is no candidate.
    if (!(x[i] >= floor)) continue;
    c.ids[n] = i;
    c.logits[n] = x[i];
    c.weights[n] = expNeg((max - x[i]) * inverse);
    n++;
  }
  c.n = n;
  return c;
}

/** Keeps the candidates whose `keep` flag is set, in their order. */
function compact(c: Candidates): void {
  let n = 0;
  for (let j = 0; j < c.n; j++) {
    if (!keep[j]) continue;
    c.ids[n] = c.ids[j];
    c.logits[n] = c.logits[j];
    c.weights[n] = c.weights[j];
    n++;
  }
  c.n = n;
}

/** The k-th largest of a[0..n) (k from 1), reordering a. */
function kthLargest(a: Float32Array, n: number, k: number): number {
  let lo = 0, hi = n - 1;
  const want = k - 1;
  while (lo < hi) {
    const pivot = medianOfThree(a[lo], a[(lo + hi) >>> 1], a[hi]);
    let i = lo, j = hi;
    while (i <= j) {
      while (a[i] > pivot) i++;
      while (a[j] < pivot) j--;
      if (i <= j) {
        const t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        j--;
      }
    }
    if (want <= j) hi = j;
    else if (want >= i) lo = i;
    else return a[want];
  }
  return a[lo];
}

function medianOfThree(a: number, b: number, c: number): number {
  return a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
}

/** The k best candidates (ties at the k-th logit: the lower ids). */
export function keepTopK(c: Candidates, k: number): void {
  if (k <= 0 || k >= c.n) return;
  values.set(c.logits.subarray(0, c.n));
  const kth = kthLargest(values, c.n, k);
  let above = 0;
  for (let j = 0; j < c.n; j++) if (c.logits[j] > kth) above++;
  let ties = k - above;
  for (let j = 0; j < c.n; j++) {
    const v = c.logits[j];
    keep[j] = v > kth || (v === kth && ties-- > 0) ? 1 : 0;
  }
  compact(c);
}

/**
 * The fewest best candidates holding at least `p` of the mass: a quickselect by mass. Each
 * round splits the undecided candidates around a pivot logit into better, equal and worse;
 * when the better ones hold what is still needed the answer lies among them, else they are
 * all kept, the equal ones follow in id order, and the worse ones are decided next.
 */
export function keepTopP(c: Candidates, p: number): void {
  if (p >= 1 || c.n <= 1) return;
  let total = 0;
  for (let j = 0; j < c.n; j++) total += c.weights[j];
  let need = p * total;
  keep.fill(0, 0, c.n);
  for (let j = 0; j < c.n; j++) work[j] = j;
  let lo = 0, hi = c.n;
  const x = c.logits, w = c.weights;
  done: while (hi > lo) {
    const pivot = medianOfThree(x[work[lo]], x[work[(lo + hi) >>> 1]], x[work[hi - 1]]);
    // Dijkstra's three-way split: [lo, lt) better, [lt, gt) equal, [gt, hi) worse.
    let lt = lo, i = lo, gt = hi;
    while (i < gt) {
      const v = x[work[i]];
      if (v > pivot) {
        const t = work[lt];
        work[lt++] = work[i];
        work[i++] = t;
      } else if (v < pivot) {
        const t = work[--gt];
        work[gt] = work[i];
        work[i] = t;
      } else {
        i++;
      }
    }
    let better = 0;
    for (let j = lo; j < lt; j++) better += w[work[j]];
    if (lt > lo && better >= need) {
      hi = lt;
      continue;
    }
    for (let j = lo; j < lt; j++) keep[work[j]] = 1;
    need -= better;
    const equal = work.subarray(lt, gt).sort();
    for (let j = 0; j < equal.length; j++) {
      keep[equal[j]] = 1;
      need -= w[equal[j]];
      if (need <= 0) break done;
    }
    lo = gt;
  }
  compact(c);
}

/** The candidates whose weight is at least `minP` of the best one's. */
export function keepMinP(c: Candidates, minP: number): void {
  if (minP <= 0 || c.n <= 1) return;
  let best = 0;
  for (let j = 0; j < c.n; j++) best = Math.max(best, c.weights[j]);
  const threshold = minP * best;
  for (let j = 0; j < c.n; j++) keep[j] = c.weights[j] >= threshold ? 1 : 0;
  compact(c);
}

/** The candidate that `u` (uniform in [0, 1)) lands on, walking the weights in id order. */
export function drawFrom(c: Candidates, u: number): number {
  let mass = 0;
  for (let j = 0; j < c.n; j++) mass += c.weights[j];
  let r = u * mass;
  for (let j = 0; j < c.n; j++) {
    r -= c.weights[j];
    if (r < 0) return c.ids[j];
  }
  return c.ids[c.n - 1];
}
