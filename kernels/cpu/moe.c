/*
 * Mixture-of-experts kernels: the experts' products (nk_matmul_experts) and their weighted
 * sum (nk_moe_combine), in the order of operations of llama.cpp's build_moe_ffn on ggml's
 * CPU ops; the routing before them is moe_route.c.
 *
 * nk_matmul_experts groups the step's (token, slot) rows by the expert they chose, so each
 * chosen expert's weights stream once per call however many rows chose it: a decode token
 * reads k of the experts, a batch of many tokens each expert at most once. The rows of an
 * expert are gathered into one block and go through the ordinary matrix-product kernels
 * (matmul.c's activation quantization, the row-by-row kernels for a few rows, the packed
 * panels for many), all experts' work in one pass of the pool. Repacked experts write
 * each row's results straight into its (token, slot) row; the others' are scattered
 * back to their (token, slot) rows.
 */
#include "nk_internal.h"

/* Matrices one nk_matmul_experts call takes (nk_matmul_many's NK_MANY_MAX). */
#define MANY_MAX 8

typedef struct {
  float *out;
  const float *experts, *weights;
  int64_t n_tokens, k, cols;
} combine_task;

/* out[t] = ((w0 e0 + w1 e1) + w2 e2) + ...: every product rounded to float before its sum,
 * as ggml_mul then the chain of ggml_add compute it. This file is compiled without FMA,
 * so the compiler cannot fuse a product into its sum. */
static void combine_token(const combine_task *a, int64_t t) {
  const int64_t cols = a->cols, k = a->k;
  float *out = a->out + t * cols;
  const float *w = a->weights + t * k;
  const float *e = a->experts + t * k * cols;
  for (int64_t c = 0; c < cols; c++) out[c] = w[0] * e[c];
  for (int64_t j = 1; j < k; j++) {
    const float wj = w[j];
    const float *ej = e + j * cols;
    for (int64_t c = 0; c < cols; c++) {
      const float prod = wj * ej[c];
      out[c] = out[c] + prod;
    }
  }
}

static void combine_run(void *arg, int32_t ith, int32_t nth) {
  combine_task *a = arg;
  int64_t t0, t1;
  nk_row_share(a->n_tokens, ith, nth, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) combine_token(a, t);
}

int32_t nk_moe_combine(nk_pool *pool, float *out, const float *experts, const float *weights,
                       int64_t n_tokens, int64_t k, int64_t cols) {
  if (!pool || !out || !experts || !weights || n_tokens < 0 || k < 1 || cols < 1)
    return NK_EINVAL;
  combine_task a = {out, experts, weights, n_tokens, k, cols};
  if (n_tokens * k * cols >= PARALLEL_MIN && n_tokens > 1) {
    nk_pool_run(pool, combine_run, &a);
  } else {
    for (int64_t t = 0; t < n_tokens; t++) combine_token(&a, t);
  }
  return NK_OK;
}

/* One nk_matmul_experts call in flight: `jobs` are the (expert, matrix) products, each an
 * nk_mm over the expert's gathered rows. */
typedef struct {
  nk_pool *pool;
  const nk_isa_ops *ops;
  nk_mm *jobs;
  int64_t n_jobs;
  /* Row path: job i owns items [first[i], first[i + 1]) of `per[i]` rows each; jobs on
   * the panel path own none there. Panel path: job i owns panels [pfirst[i], pfirst[i+1]). */
  int64_t *per, *first, *pfirst;
} experts_task;

/* The job of item `i` (searched from *m on: a thread's items mostly follow each other). */
static int64_t job_of(const int64_t *first, int64_t n_jobs, int64_t i, int64_t *m) {
  while (i < first[*m]) (*m)--;
  while (*m < n_jobs - 1 && i >= first[*m + 1]) (*m)++;
  return *m;
}

static void experts_rows(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  experts_task *a = arg;
  const uint8_t *last = NULL;
  int64_t m = 0;
  for (int64_t i = nk_pool_claim(a->pool, ith); i >= 0; i = nk_pool_claim(a->pool, ith)) {
    job_of(a->first, a->n_jobs, i, &m);
    const nk_mm *mm = &a->jobs[m];
    const int64_t r0 = (i - a->first[m]) * a->per[m];
    const int64_t r1 = r0 + a->per[m] < mm->rows ? r0 + a->per[m] : mm->rows;
    nk_mm_rows(a->ops, mm, r0, r1, &last);
  }
}

static void experts_panels(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  experts_task *a = arg;
  const int32_t pr = a->ops->panel_rows;
  void *scratch = nk_pool_scratch(a->pool, ith);
  const int64_t total = a->pfirst[a->n_jobs];
  int64_t m = 0;
  for (int64_t i = nk_pool_next(a->pool); i < total; i = nk_pool_next(a->pool)) {
    job_of(a->pfirst, a->n_jobs, i, &m);
    const nk_mm *mm = &a->jobs[m];
    const int64_t r0 = (i - a->pfirst[m]) * pr;
    if (mm->tr->quant) {
      a->ops->qgemm_panel(mm, r0, scratch);
    } else {
      a->ops->fgemm_panel(mm, r0, scratch);
    }
  }
}

/* The slots' quantized activations in expert order: slot order[i]'s row into row i of
 * all's activations, copied from own's (x's rows quantized once, a token's k slots sharing
 * one) or, where every slot has its own row of x, quantized there straight (no copy). From
 * GATHER_PARALLEL_MIN slots over the pool: a 16-stream qwen3moe-mini step's calls (128
 * slots) then spent 25.0 us a call quantizing and placing against 28.9 copying on one
 * thread; a decode token's 8 slots stay on the calling thread, where waking the pool cost
 * 2.8 us more than it saved. */
#define GATHER_PARALLEL_MIN 32

typedef struct {
  const nk_isa_ops *ops;
  const nk_mm *own, *all;
  const float *x;
  int64_t k;
  const int32_t *order;
} gather_task;

static void gather_run(void *arg, int32_t ith, int32_t nth) {
  const gather_task *g = arg;
  int64_t i0, i1;
  nk_row_share(g->all->n_tokens, ith, nth, &i0, &i1);
  for (int64_t i = i0; i < i1; i++) {
    if (g->own) {
      nk_qact_copy(&g->own->act, g->order[i] / g->k, &g->all->act, i);
    } else {
      nk_mm_quantize_row(g->ops, g->all, g->x + (int64_t)g->order[i] * g->all->cols, i);
    }
  }
}

/* Carves `bytes` (rounded to the alignment) from *at. */
static void *carve(uint8_t **at, int64_t bytes) {
  void *p = *at;
  *at += nk_round_up(bytes, NK_ALIGN);
  return p;
}

int32_t nk_matmul_experts(nk_pool *pool, int32_t n, const int32_t *types, const void *const *ws,
                          const int64_t *strides, const int64_t *rows, int64_t n_experts,
                          int64_t cols, const float *x, int64_t x_rows, const float *ids,
                          int64_t n_tokens, int64_t k, float *const *ys) {
  if (!pool || n < 1 || n > MANY_MAX || !types || !ws || !strides || !rows || !x || !ids || !ys ||
      n_experts < 1 || n_experts > NK_MAX_EXPERTS || cols < 1 || n_tokens < 0 || k < 1 ||
      (x_rows != n_tokens && x_rows != n_tokens * k))
    return NK_EINVAL;
  const int64_t slots = n_tokens * k;
  int64_t count[NK_MAX_EXPERTS + 1] = {0};
  for (int64_t s = 0; s < slots; s++) {
    const float id = ids[s];
    if (!(id >= 0 && id < (float)n_experts) || id != (float)(int64_t)id) return NK_EINVAL;
    count[(int64_t)id + 1]++;
  }
  nk_mm probe;
  int per_256 = 1, quant = 0, all_quant = 1, direct = 1;
  for (int32_t m = 0; m < n; m++) {
    if (!ws[m] || !ys[m] || strides[m] < 0 ||
        nk_mm_setup(&probe, types[m], ws[m], rows[m], cols, x, 1, ys[m]) != NK_OK)
      return NK_EINVAL;
    quant |= probe.tr->quant;
    all_quant &= probe.tr->quant;
    per_256 &= probe.tr->quant && probe.tr->block_size == 256;
    direct &= probe.tr->r16;
  }
  if (slots == 0) return NK_OK;
  int64_t active = 0;
  for (int64_t e = 0; e < n_experts; e++) active += count[e + 1] > 0;
  for (int64_t e = 0; e < n_experts; e++) count[e + 1] += count[e];

  const nk_isa_ops *ops = nk_pool_ops(pool);
  const int64_t kp = nk_round_up(cols, NK_CHUNK);
  const int64_t n_jobs = active * n;
  /* Quantized products read only the quantized rows (gather_run); a float type reads x
   * gathered. */
  const int64_t x_bytes =
      !all_quant ? nk_round_up(slots * cols * 4, NK_ALIGN)
      : x_rows != slots ? nk_round_up(nk_qact_bytes(x_rows, kp, per_256), NK_ALIGN)
                        : 0;
  int64_t bytes = nk_round_up(slots * 4, NK_ALIGN) + x_bytes +
                  nk_round_up(n_jobs * (int64_t)sizeof(nk_mm), NK_ALIGN) +
                  3 * nk_round_up((n_jobs + 1) * 8, NK_ALIGN) +
                  (quant ? nk_round_up(nk_qact_bytes(slots, kp, per_256), NK_ALIGN) : 0);
  if (!direct) {
    for (int32_t m = 0; m < n; m++) bytes += nk_round_up(slots * rows[m] * 4, NK_ALIGN);
  }
  uint8_t *at = nk_pool_shared(pool, bytes);
  if (!at) return NK_ENOMEM;
  int32_t *order = carve(&at, slots * 4);
  uint8_t *x_space = carve(&at, x_bytes);
  /* In expert order, unless the experts write into their slots' rows themselves. */
  float *results[MANY_MAX];
  for (int32_t m = 0; m < n; m++) results[m] = direct ? NULL : carve(&at, slots * rows[m] * 4);
  experts_task a = {.pool = pool, .ops = ops, .n_jobs = n_jobs};
  a.jobs = carve(&at, n_jobs * (int64_t)sizeof(nk_mm));
  a.per = carve(&at, (n_jobs + 1) * 8);
  a.first = carve(&at, (n_jobs + 1) * 8);
  a.pfirst = carve(&at, (n_jobs + 1) * 8);

  /* Slots by expert (a stable counting sort), and their rows of x in that order. */
  int64_t next[NK_MAX_EXPERTS];
  memcpy(next, count, sizeof next);
  for (int64_t s = 0; s < slots; s++) order[next[(int64_t)ids[s]]++] = (int32_t)s;
  /* Float types read x's rows gathered in that order; quantized ones never read x. */
  float *gathered = all_quant ? NULL : (float *)x_space;
  nk_mm all;
  if (all_quant) {
    nk_mm own;
    nk_mm_setup(&all, types[0], ws[0], rows[0], cols, x, slots, ys[0]);
    nk_qact_place(carve(&at, nk_qact_bytes(slots, kp, per_256)), slots, kp, per_256, &all.act);
    gather_task g = {ops, NULL, &all, x, k, order};
    if (x_rows != slots) {
      /* A token's k slots share its row: quantized once, then copied to each slot. */
      nk_mm_setup(&own, types[0], ws[0], rows[0], cols, x, x_rows, ys[0]);
      nk_qact_place(x_space, x_rows, kp, per_256, &own.act);
      nk_mm_quantize(pool, &own);
      g.own = &own;
    }
    if (slots >= GATHER_PARALLEL_MIN) {
      nk_pool_run(pool, gather_run, &g);
    } else {
      gather_run(&g, 0, 1);
    }
  } else {
    for (int64_t i = 0; i < slots; i++) {
      const int64_t row = x_rows == slots ? order[i] : order[i] / k;
      memcpy(gathered + i * cols, x + row * cols, (size_t)cols * 4);
    }
    nk_mm_setup(&all, types[0], ws[0], rows[0], cols, gathered, slots, ys[0]);
    if (quant) {
      nk_qact_place(carve(&at, nk_qact_bytes(slots, kp, per_256)), slots, kp, per_256, &all.act);
      nk_mm_quantize(pool, &all);
    }
  }

  int packed_any = 0;
  int64_t scratch = 0, j = 0;
  a.first[0] = a.pfirst[0] = 0;
  /* Stack by stack, then expert by expert: the chosen experts of a stack lie one after the
   * other in memory, so a thread's items run on into the next expert, its prefetches
   * already there, instead of alternating between the stacks (16 qwen3moe-mini streams:
   * 4-6% less time a step). */
  for (int32_t m = 0; m < n; m++) {
    for (int64_t e = 0; e < n_experts; e++) {
      const int64_t start = count[e], rows_e = count[e + 1] - count[e];
      if (rows_e == 0) continue;
      nk_mm *mm = &a.jobs[j];
      const uint8_t *w = (const uint8_t *)ws[m] + e * strides[m];
      nk_mm_setup(mm, types[m], w, rows[m], cols, gathered ? gathered + start * cols : x, rows_e,
                  direct ? ys[m] : results[m] + start * rows[m]);
      if (direct) mm->y_rows = order + start;
      nk_pool_prefetch_distances(pool, mm);
      if (quant) mm->act = nk_qact_from(&all.act, start);
      /* Repacked experts always go by rows, their layout already the panels'. */
      const int packed = !mm->tr->r16 && ops->panel_rows > 0 &&
                         rows_e >= ops->pack_min_tokens(types[m]);
      const int64_t per = nk_item_rows(mm);
      a.per[j] = per;
      a.first[j + 1] = a.first[j] + (packed ? 0 : (mm->rows + per - 1) / per);
      const int64_t panels = (mm->rows + ops->panel_rows - 1) / (ops->panel_rows > 0 ? ops->panel_rows : 1);
      a.pfirst[j + 1] = a.pfirst[j] + (packed ? panels : 0);
      if (packed) {
        packed_any = 1;
        const int64_t pb = mm->tr->quant ? nk_qpanel_bytes(ops->panel_rows, mm->kp)
                                         : nk_fpanel_bytes(ops->panel_rows, mm->cols);
        if (pb > scratch) scratch = pb;
      }
      j++;
    }
  }
  if (a.first[n_jobs] > 0) {
    nk_pool_split(pool, a.first[n_jobs], 1);
    nk_pool_run(pool, experts_rows, &a);
  }
  if (packed_any) {
    if (nk_pool_reserve(pool, scratch) != NK_OK) return NK_ENOMEM;
    nk_pool_run(pool, experts_panels, &a);
  }
  if (direct) return NK_OK;
  for (int32_t m = 0; m < n; m++) {
    for (int64_t i = 0; i < slots; i++) {
      memcpy(ys[m] + (int64_t)order[i] * rows[m], results[m] + i * rows[m], (size_t)rows[m] * 4);
    }
  }
  return NK_OK;
}

int32_t nk_matmul_experts_ref(nk_pool *pool, int32_t type, const void *w, int64_t stride,
                              int64_t rows, int64_t n_experts, int64_t cols, const float *x,
                              int64_t x_rows, const float *ids, int64_t n_tokens, int64_t k,
                              float *y) {
  if (!pool || !w || !x || !ids || !y || n_experts < 1 || n_tokens < 0 || k < 1 ||
      (x_rows != n_tokens && x_rows != n_tokens * k))
    return NK_EINVAL;
  for (int64_t s = 0; s < n_tokens * k; s++) {
    if (!(ids[s] >= 0 && ids[s] < (float)n_experts)) return NK_EINVAL;
  }
  for (int64_t s = 0; s < n_tokens * k; s++) {
    const int64_t e = (int64_t)ids[s];
    const int64_t row = x_rows == n_tokens ? s / k : s;
    const int32_t rc = nk_matmul_ref(pool, type, (const uint8_t *)w + e * stride, rows, cols,
                                     x + row * cols, 1, y + s * rows);
    if (rc != NK_OK) return rc;
  }
  return NK_OK;
}
