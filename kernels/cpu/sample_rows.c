/*
 * nk_sample_draw for several rows of logits at once, the rows spread over a pool's threads:
 * a batched decode step samples every sequence's token from its own row, and sixteen
 * streams drawing one after another on the engine's thread spent 3-9 ms a step there
 * (0.2-0.5 ms a draw over a 152k vocabulary). Each draw is nk_sample_draw itself, on its
 * thread's scratch, so a row's token is the one a lone draw gives.
 */
#include "nk_internal.h"

typedef struct {
  nk_pool *pool;
  const float *rows;
  int64_t width, n;
  const int32_t *which;
  const double *params, *table;
  int32_t *out;
} draw_rows_task;

static void draw_rows_run(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  const draw_rows_task *a = arg;
  uint8_t *scratch = nk_pool_scratch(a->pool, ith);
  for (int64_t i = nk_pool_next(a->pool); i < a->n; i = nk_pool_next(a->pool)) {
    a->out[i] = (int32_t)nk_sample_draw(a->rows + (int64_t)a->which[i] * a->width, a->width,
                               a->params + i * NK_SAMPLE_PARAMS, a->table, scratch);
  }
}

int32_t nk_sample_draw_rows(nk_pool *pool, const float *rows, int64_t width, int64_t n_rows,
                            const int32_t *which, int64_t n, const double *params,
                            const double *table, int32_t *out) {
  if (!pool || !rows || width < 1 || n_rows < 0 || n < 0 || (n > 0 && (!which || !params || !out)) ||
      !table) {
    return NK_EINVAL;
  }
  for (int64_t i = 0; i < n; i++) {
    if (which[i] < 0 || which[i] >= n_rows) return NK_EINVAL;
  }
  if (n == 0) return NK_OK;
  if (nk_pool_reserve(pool, nk_sample_scratch_bytes(width)) != NK_OK) return NK_ENOMEM;
  draw_rows_task a = {pool, rows, width, n, which, params, table, out};
  nk_pool_run(pool, draw_rows_run, &a);
  return NK_OK;
}
