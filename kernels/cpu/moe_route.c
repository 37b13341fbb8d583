/*
 * Mixture-of-experts routing (nk_moe_route): each token's softmax over its router scores,
 * the top k experts in the order of ggml's descending argsort (moe_sort.c) and their
 * weights, as llama.cpp's build_moe_ffn computes them on ggml's CPU ops.
 */
#include <math.h>

#include "nk_internal.h"

/* llama.cpp's floor for the sum of the chosen experts' probabilities: 2^-14. */
#define WEIGHT_SUM_FLOOR 6.103515625e-5f

void nk_argsort_desc(int32_t *idx, int64_t n, const float *p);

typedef struct {
  const float *logits;
  int64_t n_rows, n_experts, k;
  int32_t normalize;
  float *ids, *weights;
} route_task;

/* The k largest of p[0, n) into order, largest first, when that answer does not depend on
 * how a sort breaks ties: no NaN, the k values distinct, and none outside them equal to the
 * least of them. Then std::sort orders them so too, and a selection costs a few dozen
 * compares where the introsort over every expert costs hundreds, many of them mispredicted
 * branches on a real router's scores (64 experts, top 8, 16 tokens on 2 threads, scores
 * changing from call to call: 19.6 -> 7.1 us). Returns 0, order undefined, when a tie or
 * NaN needs the sort. */
static int top_k_untied(const float *p, int64_t n, int64_t k, int32_t *order) {
  int64_t have = 0;
  for (int64_t e = 0; e < n; e++) {
    const float v = p[e];
    if (v != v) return 0;
    if (have == k && !(v > p[order[k - 1]])) continue;
    int64_t j = have < k ? have++ : k - 1;
    for (; j > 0 && v > p[order[j - 1]]; j--) order[j] = order[j - 1];
    order[j] = (int32_t)e;
  }
  for (int64_t j = 0; j + 1 < k; j++) {
    if (!(p[order[j]] > p[order[j + 1]])) return 0;
  }
  const float least = p[order[k - 1]];
  int64_t at_least = 0;
  for (int64_t e = 0; e < n; e++) at_least += p[e] >= least;
  return at_least == k;
}

/* Token t's experts and weights. */
static void route_token(const route_task *a, int64_t t) {
  const int64_t n_experts = a->n_experts, k = a->k;
  float p[NK_MAX_EXPERTS];
  int32_t order[NK_MAX_EXPERTS];
  const float *l = a->logits + t * n_experts;
  /* ggml_soft_max_f32: the max, expf of each score less it, their sum in double, then
   * each value times the float of 1/sum. */
  float max = -INFINITY;
  for (int64_t e = 0; e < n_experts; e++) max = max > l[e] ? max : l[e];
  double sum = 0;
  for (int64_t e = 0; e < n_experts; e++) {
    p[e] = expf(l[e] - max);
    sum += (double)p[e];
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t e = 0; e < n_experts; e++) p[e] *= inv;
  if (!top_k_untied(p, n_experts, k, order)) nk_argsort_desc(order, n_experts, p);
  /* get_rows, then sum_rows (double, rounded to float), clamp and div. */
  double chosen = 0;
  for (int64_t j = 0; j < k; j++) chosen += (double)p[order[j]];
  float denom = (float)chosen;
  denom = denom < WEIGHT_SUM_FLOOR ? WEIGHT_SUM_FLOOR : denom;
  for (int64_t j = 0; j < k; j++) {
    a->ids[t * k + j] = (float)order[j];
    a->weights[t * k + j] = a->normalize ? p[order[j]] / denom : p[order[j]];
  }
}

static void route_run(void *arg, int32_t ith, int32_t nth) {
  route_task *a = arg;
  int64_t t0, t1;
  nk_row_share(a->n_rows, ith, nth, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) route_token(a, t);
}

int32_t nk_moe_route(nk_pool *pool, const float *logits, int64_t n_rows, int64_t n_experts,
                     int64_t k, int32_t normalize, float *ids, float *weights) {
  if (!pool || !logits || !ids || !weights || n_rows < 0 || n_experts < 1 ||
      n_experts > NK_MAX_EXPERTS || k < 1 || k > n_experts)
    return NK_EINVAL;
  route_task a = {logits, n_rows, n_experts, k, normalize, ids, weights};
  /* A token's softmax and sort take about 2 us (64 experts): a batch's go over the pool. */
  if (n_rows > 1) {
    nk_pool_run(pool, route_run, &a);
  } else {
    for (int64_t t = 0; t < n_rows; t++) route_token(&a, t);
  }
  return NK_OK;
}
