/*
 * Greedy decoding's pick on the native logits: each row's first index of its largest
 * value, NaN never winning, optionally among the tokens a row's bitset allows (structured
 * output). A masked row walks its bitset a word at a time: runs of all-ones words go to the
 * level's vector scan (isa_argmax.c), zero words are skipped whole, and a mixed word visits
 * its set bits only. nk_argmax_rows_masked_ref is the plain scan the checker compares with.
 */
#include <stdlib.h>

#include "nk_internal.h"

typedef struct {
  const nk_isa_ops *ops;
  const float *x;
  const uint32_t *const *masks;
  int64_t cols, parts, n_items;
  float *vals;
  int64_t *ats;
} argmax_args;

static int allowed(const uint32_t *bits, int64_t i) {
  return (bits[i >> 5] >> (i & 31)) & 1u;
}

/* Keeps (v, i) over (*bv, *bi) when it is larger, or the first number seen (*bi < 0). */
static void take(float v, int64_t i, float *bv, int64_t *bi) {
  if (v == v && (*bi < 0 || v > *bv)) {
    *bv = v;
    *bi = i;
  }
}

/* The best allowed value of x[c0, c1) and its index (-1: none, or all NaN). */
static void masked_span(const nk_isa_ops *ops, const float *x, const uint32_t *bits, int64_t c0,
                        int64_t c1, float *best, int64_t *at) {
  float bv = 0.0f;
  int64_t bi = -1;
  for (int64_t c = c0; c < c1;) {
    const int64_t w = c >> 5;
    const uint32_t word = bits[w];
    const int64_t end = (w + 1) * 32 < c1 ? (w + 1) * 32 : c1;
    if (word == 0xffffffffu) {
      int64_t e = end;
      while (e < c1 && bits[e >> 5] == 0xffffffffu) e = e + 32 < c1 ? e + 32 : c1;
      float v;
      int64_t i;
      ops->argmax_span(x + c, e - c, &v, &i);
      if (i < e - c) take(v, c + i, &bv, &bi);
      c = e;
      continue;
    }
    uint32_t m = word >> (c & 31) << (c & 31);
    if (end - w * 32 < 32) m &= (1u << (end - w * 32)) - 1u;
    for (; m != 0; m &= m - 1) {
      const int64_t i = w * 32 + __builtin_ctz(m);
      take(x[i], i, &bv, &bi);
    }
    c = end;
  }
  *best = bv;
  *at = bi;
}

/* Item i is part i % parts of row i / parts: a single row (a decode step's logits) is split
 * over the threads, each scanning the share of it that it wrote. */
static void argmax_item(const argmax_args *a, int64_t i) {
  const int64_t row = i / a->parts, part = i % a->parts;
  const int64_t c0 = a->cols * part / a->parts, c1 = a->cols * (part + 1) / a->parts;
  const float *x = a->x + row * a->cols;
  const uint32_t *bits = a->masks ? a->masks[row] : NULL;
  if (bits) {
    masked_span(a->ops, x, bits, c0, c1, &a->vals[i], &a->ats[i]);
    return;
  }
  int64_t at;
  a->ops->argmax_span(x + c0, c1 - c0, &a->vals[i], &at);
  a->ats[i] = at < c1 - c0 ? c0 + at : -1;
}

static void argmax_task(void *arg, int32_t ith, int32_t nth) {
  const argmax_args *a = arg;
  int64_t i0, i1;
  nk_row_share(a->n_items, ith, nth, &i0, &i1);
  for (int64_t i = i0; i < i1; i++) argmax_item(a, i);
}

/* A row with no number to pick: its first allowed index (0 unmasked, or none allowed). */
static int32_t fallback(const uint32_t *bits, int64_t cols) {
  if (bits) {
    for (int64_t i = 0; i < cols; i++) {
      if (allowed(bits, i)) return (int32_t)i;
    }
  }
  return 0;
}

int32_t nk_argmax_rows_masked(nk_pool *pool, const float *x, int64_t rows, int64_t cols,
                              const uint32_t *const *masks, int32_t *out) {
  if (!pool || !x || !out || rows < 0 || cols <= 0 || cols > INT32_MAX) return NK_EINVAL;
  const int32_t nth = nk_pool_threads(pool);
  const int64_t parts = rows >= nth || rows * cols < PARALLEL_MIN ? 1 : nth;
  argmax_args a = {nk_pool_ops(pool), x, masks, cols, parts, rows * parts, NULL, NULL};
  uint8_t *buf = nk_pool_shared(pool, a.n_items * (4 + 8) + 8);
  if (!buf) return NK_ENOMEM;
  a.ats = (int64_t *)buf;
  a.vals = (float *)(buf + a.n_items * 8);
  if (parts == 1 && rows * cols < PARALLEL_MIN) {
    for (int64_t i = 0; i < a.n_items; i++) argmax_item(&a, i);
  } else {
    nk_pool_run(pool, argmax_task, &a);
  }
  for (int64_t r = 0; r < rows; r++) {
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t p = 0; p < parts; p++) {
      const int64_t i = r * parts + p;
      if (a.ats[i] >= 0 && (bi < 0 || a.vals[i] > bv)) {
        bv = a.vals[i];
        bi = a.ats[i];
      }
    }
    out[r] = bi >= 0 ? (int32_t)bi : fallback(masks ? masks[r] : NULL, cols);
  }
  return NK_OK;
}

int32_t nk_argmax_rows(nk_pool *pool, const float *x, int64_t rows, int64_t cols, int32_t *out) {
  return nk_argmax_rows_masked(pool, x, rows, cols, NULL, out);
}

int32_t nk_argmax_rows_masked_ref(const float *x, int64_t rows, int64_t cols,
                                  const uint32_t *const *masks, int32_t *out) {
  if (!x || !out || rows < 0 || cols <= 0 || cols > INT32_MAX) return NK_EINVAL;
  for (int64_t r = 0; r < rows; r++) {
    const uint32_t *bits = masks ? masks[r] : NULL;
    float bv = 0.0f;
    int64_t bi = -1;
    for (int64_t i = 0; i < cols; i++) {
      if (!bits || allowed(bits, i)) take(x[r * cols + i], i, &bv, &bi);
    }
    out[r] = bi >= 0 ? (int32_t)bi : fallback(bits, cols);
  }
  return NK_OK;
}
