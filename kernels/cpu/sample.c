/*
 * The sampled draw of src/engine/truncation.ts in C (candidates within the cutoff, top-k,
 * top-p, min-p, then the draw) and the row summary of sampler.ts's log-probs, by the same
 * steps with the same double arithmetic in the same order, so that a seed draws the same
 * token and a log-prob comes out the same either way (src/engine/native_sampling_test.ts
 * checks both over random rows). In TypeScript a draw over a 152k vocabulary costs 1-2 ms,
 * which sixteen streams pay sixteen times a step.
 *
 * fp-contract is off: a fused multiply-add rounds once where the TypeScript rounds twice.
 * The exponential table comes from the caller (exp_table.ts), so no libm result enters.
 */
#pragma GCC optimize("fp-contract=off")

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nk.h"
#include "sample.h"

#define BUCKETS 2048

typedef struct {
  int64_t n;
  int32_t *ids;
  float *logits;
  double *weights;
  int weighted;
  /* The AVX-512 passes (kern_avx512_sample.c) where they give the same answers. */
  int fast;
  double max, temperature;
  int32_t *undecided;
  uint16_t *bucket_of;
  uint8_t *keep;
  double *amount;
  const double *table;
} cands;

static size_t align8(size_t v) {
  return (v + 7) & ~(size_t)7;
}

NK_API int64_t nk_sample_scratch_bytes(int64_t n) {
  const size_t m = (size_t)(n > 0 ? n : 1);
  return (int64_t)(align8(m * 4) * 3 + m * 8 + align8(m * 2) + align8(m) +
                   BUCKETS * 8);
}

/* expNeg of exp_table.ts. y is in [0, 16384), where truncation then a step up is ceil()
 * without libm (the baseline x86-64 build has no ROUNDSD). */
static double exp_neg(const double *table, double s) {
  if (!(s < NK_EXP_RANGE)) return 0.0;
  const double y = s * NK_EXP_STEPS;
  const int64_t t = (int64_t)y;
  const double k = (double)(t + ((double)t < y));
  const double r = (k - y) / NK_EXP_STEPS;
  return table[(int64_t)k] * (1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0))));
}

/* sum4 of truncation.ts: four running sums, element j into sum j % 4, then paired. */
static double sum4(const double *w, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
#pragma GCC unroll 4
    for (int l = 0; l < 4; l++) s[l] += w[j + l];
  }
  for (int l = 0; j < n; j++, l++) s[l] += w[j];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

static void weigh(cands *c) {
  if (c->weighted) return;
  const double inverse = 1.0 / c->temperature;
  for (int64_t j = 0; j < c->n; j++) {
    c->weights[j] = exp_neg(c->table, (c->max - (double)c->logits[j]) * inverse);
  }
  c->weighted = 1;
}

/* Weighted (after top-p or min-p, which keep most of a flat row, scattered) every candidate
 * is copied and only a kept one advances n, as a branch per candidate mispredicts there;
 * unweighted (after top-k, which keeps a few) the branch skips the rest. */
static void compact(cands *c) {
  int64_t n = 0;
  if (c->weighted) {
    for (int64_t j = 0; j < c->n; j++) {
      c->ids[n] = c->ids[j];
      c->logits[n] = c->logits[j];
      c->weights[n] = c->weights[j];
      n += c->keep[j];
    }
  } else {
    for (int64_t j = 0; j < c->n; j++) {
      if (!c->keep[j]) continue;
      c->ids[n] = c->ids[j];
      c->logits[n] = c->logits[j];
      n++;
    }
  }
  c->n = n;
}

/* keepBest of truncation.ts: amounts are the weights, or 1 each when `weights` is NULL. */
static void keep_best(cands *c, double need, const double *weights) {
  memset(c->keep, 0, (size_t)c->n);
  const float *x = c->logits;
  int64_t m = c->n;
  for (int64_t j = 0; j < m; j++) c->undecided[j] = (int32_t)j;
  /* The first round, over every candidate in order, takes the vector passes when fast. */
  for (int first = 1; m > 0 && need > 0; first = 0) {
    const int vector = first && c->fast;
    double hi = -INFINITY, lo = INFINITY;
    if (vector) {
      nk_sample_span_avx512(x, m, &hi, &lo);
    } else {
      for (int64_t j = 0; j < m; j++) {
        const double v = x[c->undecided[j]];
        if (v > hi) hi = v;
        if (v < lo) lo = v;
      }
    }
    if (hi == lo) {
      for (int64_t j = 0; j < m && need > 0; j++) {
        c->keep[c->undecided[j]] = 1;
        need -= weights ? weights[c->undecided[j]] : 1.0;
      }
      return;
    }
    const double scale = BUCKETS / (hi - lo);
    for (int b = 0; b < BUCKETS; b++) c->amount[b] = 0.0;
    if (vector) {
      nk_sample_buckets_avx512(x, m, hi, scale, BUCKETS - 1, c->bucket_of);
      for (int64_t j = 0; j < m; j++) c->amount[c->bucket_of[j]] += weights ? weights[j] : 1.0;
    } else {
      for (int64_t j = 0; j < m; j++) {
        const int32_t at = c->undecided[j];
        /* Not negative: truncation floors. */
        const double f = (hi - (double)x[at]) * scale;
        const int b = f < BUCKETS - 1 ? (int)f : BUCKETS - 1;
        c->bucket_of[j] = (uint16_t)b;
        c->amount[b] += weights ? weights[at] : 1.0;
      }
    }
    int target = 0;
    while (target < BUCKETS && c->amount[target] < need) need -= c->amount[target++];
    int64_t next = 0;
    /* Branch-free by mass, branching by count, as compact. */
    for (int64_t j = 0; j < m; j++) {
      const int b = c->bucket_of[j];
      const int32_t at = c->undecided[j];
      if (weights) {
        c->keep[at] = b < target;
        c->undecided[next] = at;
        next += b == target;
      } else if (b < target) {
        c->keep[at] = 1;
      } else if (b == target) {
        c->undecided[next++] = at;
      }
    }
    m = next;
  }
}

static void keep_top_k(cands *c, int64_t k) {
  if (k <= 0 || k >= c->n) return;
  keep_best(c, (double)k, NULL);
  compact(c);
}

static void keep_top_p(cands *c, double p) {
  if (p >= 1 || c->n <= 1) return;
  weigh(c);
  keep_best(c, p * sum4(c->weights, c->n), c->weights);
  compact(c);
}

static void keep_min_p(cands *c, double min_p) {
  if (min_p <= 0 || c->n <= 1) return;
  weigh(c);
  double best = 0;
  for (int64_t j = 0; j < c->n; j++) best = c->weights[j] > best ? c->weights[j] : best;
  const double threshold = min_p * best;
  for (int64_t j = 0; j < c->n; j++) c->keep[j] = c->weights[j] >= threshold;
  compact(c);
}

static int64_t draw_from(cands *c, double u) {
  weigh(c);
  double r = u * sum4(c->weights, c->n);
  for (int64_t j = 0; j < c->n; j++) {
    r -= c->weights[j];
    if (r < 0) return c->ids[j];
  }
  return c->n > 0 ? c->ids[c->n - 1] : -1;
}

/* The largest of `from` and the values of x[0, n) (NaN skipped): with from = -inf, the
 * maximum sampler.ts's rowSummary finds; with from = x[0], x[argmax(x)] of common/argmax.ts
 * (NaN when x[0] is, as no value is greater than it). */
static double largest_from(const float *x, int64_t n, float from, int fast) {
  if (from != from) return NAN;
  if (fast) return nk_sample_max_avx512(x, n, from);
  float best = from;
  for (int64_t i = 0; i < n; i++) best = x[i] > best ? x[i] : best;
  return best;
}

/* The draw; `fast` takes the AVX-512 candidate pass, with the weights when top-k (which
 * ranks by logit) does not drop most candidates first. */
static int64_t sample_draw(const float *x, int64_t n, const double *params, const double *table,
                           uint8_t *scratch, int fast) {
  const double max = n == 0 ? NAN : largest_from(x, n, x[0], fast);
  const double temperature = params[NK_SAMPLE_TEMPERATURE];
  const int64_t top_k = (int64_t)params[NK_SAMPLE_TOP_K];
  const size_t m = (size_t)(n > 0 ? n : 1);
  cands c = {0};
  c.ids = (int32_t *)scratch;
  c.undecided = (int32_t *)(scratch + align8(m * 4));
  c.logits = (float *)(scratch + 2 * align8(m * 4));
  c.weights = (double *)(scratch + 3 * align8(m * 4));
  c.amount = c.weights + m;
  c.bucket_of = (uint16_t *)(c.amount + BUCKETS);
  c.keep = (uint8_t *)c.bucket_of + align8(m * 2);
  c.table = table;
  c.max = max;
  c.temperature = temperature;
  const double floor_at = max - params[NK_SAMPLE_CUTOFF] * temperature;
  c.fast = fast;
  if (fast) {
    c.weighted = top_k <= 0;
    c.n = nk_sample_candidates_avx512(x, n, floor_at, max, 1.0 / temperature, table, c.ids,
                                      c.logits, c.weighted ? c.weights : NULL);
  } else {
    for (int64_t i = 0; i < n; i++) {
      /* NaN is no candidate. */
      if (!((double)x[i] >= floor_at)) continue;
      c.ids[c.n] = (int32_t)i;
      c.logits[c.n] = x[i];
      c.n++;
    }
  }
  keep_top_k(&c, top_k);
  keep_top_p(&c, params[NK_SAMPLE_TOP_P]);
  keep_min_p(&c, params[NK_SAMPLE_MIN_P]);
  return draw_from(&c, params[NK_SAMPLE_U]);
}

NK_API int64_t nk_sample_draw(const float *x, int64_t n, const double *params,
                              const double *table, uint8_t *scratch) {
  return sample_draw(x, n, params, table, scratch, nk_best_isa() >= NK_ISA_AVX512);
}

NK_API int64_t nk_sample_draw_ref(const float *x, int64_t n, const double *params,
                                  const double *table, uint8_t *scratch) {
  return sample_draw(x, n, params, table, scratch, 0);
}

/* The sum of e^-(max - x[i]) over x in sum4's order (NaN weighs 0). */
static double exp_sum(const double *table, const float *x, int64_t n, double max) {
  double s[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; i++) s[i % 4] += exp_neg(table, max - (double)x[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

/* sampler.ts's topIds, step for step (NaN included): the k largest, best first, ties to the
 * lower index. */
static int32_t top_ids(const float *x, int64_t n, int32_t k, int32_t *top) {
  int32_t len = 0;
  for (int64_t i = 0; i < n; i++) {
    if (len == k && x[i] <= x[top[k - 1]]) continue;
    int32_t j = len < k ? len++ : k - 1;
    top[j] = (int32_t)i;
    for (; j > 0 && x[top[j - 1]] < x[top[j]]; j--) {
      const int32_t t = top[j - 1];
      top[j - 1] = top[j];
      top[j] = t;
    }
  }
  return len;
}

static int32_t sample_logprobs(const float *x, int64_t n, const double *table, int32_t top,
                               int32_t *ids, double *out, int fast) {
  const double max = largest_from(x, n, -INFINITY, fast);
  out[0] = max;
  out[1] = fast ? nk_sample_exp_sum_avx512(x, n, max, table) : exp_sum(table, x, n, max);
  return top > 0 ? top_ids(x, n, top, ids) : 0;
}

NK_API int32_t nk_sample_logprobs(const float *x, int64_t n, const double *table, int32_t top,
                                  int32_t *top_ids, double *out) {
  return sample_logprobs(x, n, table, top, top_ids, out, nk_best_isa() >= NK_ISA_AVX512);
}

NK_API int32_t nk_sample_logprobs_ref(const float *x, int64_t n, const double *table, int32_t top,
                                      int32_t *top_ids, double *out) {
  return sample_logprobs(x, n, table, top, top_ids, out, 0);
}
