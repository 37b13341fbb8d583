/*
 * nk_hadamard: the Walsh-Hadamard rotation a model applies around a quantized KV cache
 * (kvRotation, src/backend/hadamard.ts): every n values of every row become H_n x / sqrt(n),
 * in place, as n log n butterflies (isa_hadamard.c) instead of the n^2 product that defines
 * it (src/backend/reference/hadamard.ts, which hadamard_test compares this with).
 */
#include <math.h>

#include "nk_internal.h"

typedef struct {
  const nk_isa_ops *ops;
  float *x;
  int64_t chunks, n;
  float norm;
} hadamard_args;

static void hadamard_task(void *arg, int32_t ith, int32_t nth) {
  const hadamard_args *h = arg;
  int64_t c0, c1;
  nk_row_share(h->chunks, ith, nth, &c0, &c1);
  for (int64_t c = c0; c < c1; c++) h->ops->hadamard_chunk(h->x + c * h->n, h->n, h->norm);
}

int32_t nk_hadamard(nk_pool *pool, float *x, int64_t rows, int64_t cols, int64_t n) {
  if (!pool || !x || rows < 0 || cols <= 0 || n < 2 || (n & (n - 1)) != 0 || cols % n != 0) {
    return NK_EINVAL;
  }
  hadamard_args h = {nk_pool_ops(pool), x, rows * (cols / n), n, 1.0f / sqrtf((float)n)};
  nk_pool_run_sized(pool, hadamard_task, &h, rows * cols);
  return NK_OK;
}
