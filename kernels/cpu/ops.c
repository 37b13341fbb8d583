/*
 * Entry points of the non-matrix ops: validation, then the work split over the pool. Ops
 * too small to repay waking the workers (a decode step's norms and adds) run on the
 * calling thread alone.
 */
#include <math.h>
#include <stdlib.h>

#include "dequant_ref.h"

typedef struct {
  nk_pool *pool;
  const nk_isa_ops *ops;
  float *out;
  const float *a, *b, *w;
  int64_t n_rows, dim;
  float eps;
  const int32_t *ids;
  const uint8_t *table;
  int32_t type;
  int64_t row_bytes;
} rows_args;

static void rmsnorm_task(void *arg, int32_t ith, int32_t nth) {
  const rows_args *r = arg;
  int64_t i0, i1;
  nk_row_share(r->n_rows, ith, nth, &i0, &i1);
  for (int64_t i = i0; i < i1; i++) {
    r->ops->rmsnorm_row(r->out + i * r->dim, r->a + i * r->dim, r->w, r->dim, r->eps);
  }
}

int32_t nk_rmsnorm(nk_pool *pool, float *out, const float *x, const float *weight, int64_t n_rows,
                   int64_t dim, float eps) {
  if (!pool || !out || !x || n_rows < 0 || dim <= 0 || !(eps >= 0.0f)) return NK_EINVAL;
  rows_args r = {.pool = pool,
                 .ops = nk_pool_ops(pool),
                 .out = out,
                 .a = x,
                 .w = weight,
                 .n_rows = n_rows,
                 .dim = dim,
                 .eps = eps};
  nk_pool_run_sized(pool, rmsnorm_task, &r, n_rows * dim);
  return NK_OK;
}

static void get_rows_task(void *arg, int32_t ith, int32_t nth) {
  const rows_args *r = arg;
  int64_t i0, i1;
  nk_row_share(r->n_rows, ith, nth, &i0, &i1);
  for (int64_t i = i0; i < i1; i++) {
    nk_dequantize_table_row(r->type, r->table, r->ids[i], r->row_bytes, r->dim,
                            r->out + i * r->dim);
  }
}

int32_t nk_get_rows(nk_pool *pool, int32_t type, const void *table, int64_t n_rows, int64_t cols,
                    const int32_t *ids, int64_t n_ids, float *out) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (!pool || rb < 0 || !table || !ids || !out || n_ids < 0) return NK_EINVAL;
  if (nk_type_traits(type)->r16 && n_rows % 16 != 0) return NK_EINVAL;
  for (int64_t i = 0; i < n_ids; i++) {
    if (ids[i] < 0 || ids[i] >= n_rows) return NK_EINVAL;
  }
  rows_args r = {.pool = pool,
                 .out = out,
                 .n_rows = n_ids,
                 .dim = cols,
                 .ids = ids,
                 .table = table,
                 .type = type,
                 .row_bytes = rb};
  nk_pool_run_sized(pool, get_rows_task, &r, n_ids * cols);
  return NK_OK;
}

enum { EW_SILU_MUL, EW_GELU_MUL, EW_ADD, EW_ADD_BIAS, EW_SCALE };

/* One element-wise op over n values: b is a second operand of n values, or for EW_ADD_BIAS
 * one row of `cols` added to every row; EW_SCALE reads no b. */
typedef struct {
  const nk_isa_ops *ops;
  int32_t kind;
  float *out;
  const float *a, *b;
  int64_t n, cols;
  float factor;
} ew_args;

static void ew_span(const ew_args *e, int64_t i0, int64_t n) {
  float *out = e->out + i0;
  const float *a = e->a + i0;
  switch (e->kind) {
    case EW_SILU_MUL: e->ops->silu_mul(out, a, e->b + i0, n); break;
    case EW_GELU_MUL: e->ops->gelu_mul(out, a, e->b + i0, n); break;
    case EW_ADD: e->ops->add(out, a, e->b + i0, n); break;
    case EW_ADD_BIAS:
      for (int64_t i = 0, c = i0 % e->cols; i < n; i++, c = c + 1 == e->cols ? 0 : c + 1) {
        out[i] = a[i] + e->b[c];
      }
      break;
    default:
      for (int64_t i = 0; i < n; i++) out[i] = a[i] * e->factor;
      break;
  }
}

static void ew_task(void *arg, int32_t ith, int32_t nth) {
  const ew_args *e = arg;
  const int64_t per = nk_round_up((e->n + nth - 1) / nth, 16);
  const int64_t i0 = ith * per;
  if (i0 >= e->n) return;
  ew_span(e, i0, e->n - i0 < per ? e->n - i0 : per);
}

/* Runs e (its ops filled in here, once the pool is known to be one). */
static int32_t elementwise(nk_pool *pool, ew_args e_in) {
  ew_args *e = &e_in;
  if (!pool || !e->out || !e->a || (e->kind != EW_SCALE && !e->b) || e->n < 0 ||
      (e->kind == EW_ADD_BIAS && (e->cols <= 0 || e->n % e->cols != 0)) ||
      (e->kind == EW_SCALE && !isfinite(e->factor))) {
    return NK_EINVAL;
  }
  e->ops = nk_pool_ops(pool);
  nk_pool_run_sized(pool, ew_task, e, e->n);
  return NK_OK;
}

int32_t nk_silu_mul(nk_pool *pool, float *out, const float *gate, const float *up, int64_t n) {
  return elementwise(pool, (ew_args){NULL, EW_SILU_MUL, out, gate, up, n, 1, 0});
}

int32_t nk_gelu_mul(nk_pool *pool, float *out, const float *gate, const float *up, int64_t n) {
  return elementwise(pool, (ew_args){NULL, EW_GELU_MUL, out, gate, up, n, 1, 0});
}

int32_t nk_add(nk_pool *pool, float *out, const float *a, const float *b, int64_t n) {
  return elementwise(pool, (ew_args){NULL, EW_ADD, out, a, b, n, 1, 0});
}

int32_t nk_add_bias(nk_pool *pool, float *out, const float *a, const float *bias, int64_t n,
                    int64_t cols) {
  return elementwise(pool, (ew_args){NULL, EW_ADD_BIAS, out, a, bias, n, cols, 0});
}

int32_t nk_scale(nk_pool *pool, float *out, const float *a, float factor, int64_t n) {
  return elementwise(pool, (ew_args){NULL, EW_SCALE, out, a, NULL, n, 1, factor});
}
