/*
 * The reference matrix product every fast variant is checked against: each weight row
 * dequantized to f32 by the reference dequantizer, dotted with the f32 activations in
 * double. Rows are split evenly over the pool's threads.
 */
#include "dequant_ref.h"

typedef struct {
  nk_pool *pool;
  int32_t type;
  const uint8_t *w;
  int64_t rows, cols, row_bytes, n_tokens;
  const float *x;
  float *y;
} ref_args;

static void ref_task(void *arg, int32_t ith, int32_t nth) {
  const ref_args *a = arg;
  float *row = nk_pool_scratch(a->pool, ith);
  const int64_t per = (a->rows + nth - 1) / nth;
  const int64_t r1 = a->rows < (ith + 1) * per ? a->rows : (ith + 1) * per;
  for (int64_t r = ith * per; r < r1; r++) {
    nk_dequantize_table_row(a->type, a->w, r, a->row_bytes, a->cols, row);
    for (int64_t t = 0; t < a->n_tokens; t++) {
      const float *x = a->x + t * a->cols;
      double sum = 0.0;
      for (int64_t c = 0; c < a->cols; c++) sum += (double)row[c] * (double)x[c];
      a->y[t * a->rows + r] = (float)sum;
    }
  }
}

int32_t nk_matmul_ref(nk_pool *pool, int32_t type, const void *w, int64_t rows, int64_t cols,
                      const float *x, int64_t n_tokens, float *y) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (!pool || rb < 0 || rows <= 0 || n_tokens <= 0 || !w || !x || !y) return NK_EINVAL;
  if (nk_type_traits(type)->r16 && rows % 16 != 0) return NK_EINVAL;
  if (nk_pool_reserve(pool, cols * 4) != NK_OK) return NK_ENOMEM;
  ref_args a = {pool, type, w, rows, cols, rb, n_tokens, x, y};
  nk_pool_run(pool, ref_task, &a);
  return NK_OK;
}
