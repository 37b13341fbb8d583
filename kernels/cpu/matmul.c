/*
 * nk_matmul, nk_matmul_many: validate, quantize the activations into pool scratch (once
 * for all the matrices that share them), then split the rows over the pool. Few tokens go
 * row by row (every weight byte read once per call, the bandwidth-bound decode case); many
 * tokens go panel by panel through the packed mat-mat kernels, which reuse each unpacked
 * weight for every token.
 */
#include <immintrin.h>

#include "nk_internal.h"

/* Bytes of weights per work item of the row-by-row path (nk_item_rows). */
#define ITEM_BYTES 16384
/* Matrices one nk_matmul_many call takes. */
#define NK_MANY_MAX 8

typedef struct {
  nk_pool *pool;
  const nk_isa_ops *ops;
  int32_t n;
  /* The matrix the panel path is on. */
  int32_t cur;
  nk_mm mm[NK_MANY_MAX];
  /* The row path's work items: matrix m owns items [first[m], first[m + 1]). */
  int64_t per[NK_MANY_MAX], first[NK_MANY_MAX + 1];
  /* Row path (share_quantization): the calling thread quantizes inside the task and sets
   * act_ready for the others. */
  int32_t quantize_in_task;
  _Atomic int32_t act_ready;
} mm_task;

int64_t nk_qpanel_bytes(int32_t panel_rows, int64_t kp) {
  return kp * panel_rows + 2 * (kp / 16) * panel_rows * 4;
}

int64_t nk_fpanel_bytes(int32_t panel_rows, int64_t cols) {
  return cols * panel_rows * 4;
}

/* Per 256 when act has the per-256 fields (every matrix of the call a K-quant), per 32
 * otherwise. */
void nk_mm_quantize_row(const nk_isa_ops *ops, const nk_mm *mm, const float *x, int64_t t) {
  const int64_t kp = mm->kp;
  if (mm->act.dk) {
    ops->quantize_act_k(x, mm->cols, &mm->act, t);
    return;
  }
  ops->quantize_act(x, mm->cols, kp, mm->act.q + t * kp, mm->act.d16 + t * (kp / 16),
                    mm->act.s16 + t * (kp / 16), mm->act.d32 + t * (kp / 32),
                    mm->act.s32 + t * (kp / 32));
}

static void quantize_token(const nk_isa_ops *ops, const nk_mm *mm, int64_t t) {
  nk_mm_quantize_row(ops, mm, mm->x + t * mm->cols, t);
}

typedef struct {
  const nk_isa_ops *ops;
  const nk_mm *mm;
} quantize_args;

static void quantize_task(void *arg, int32_t ith, int32_t nth) {
  const quantize_args *a = arg;
  int64_t t0, t1;
  nk_row_share(a->mm->n_tokens, ith, nth, &t0, &t1);
  for (int64_t t = t0; t < t1; t++) quantize_token(a->ops, a->mm, t);
}

/* Token rows from which the activations are quantized over the pool. Below, one thread
 * quantizes them all: a row of 1024-3072 values takes it ~1 us inside a model step, and
 * splitting a few rows saves less than the pool's start and join add. Alternated in one
 * process, a k = 4 verification of qwen3-0.6b Q4_K_M (5 rows) took 0.972-0.980x the time
 * with its rows on one thread instead of split, 8 rows 0.995x. */
#define QUANTIZE_POOL_MIN 9

void nk_mm_quantize(nk_pool *pool, const nk_mm *mm) {
  const nk_isa_ops *ops = nk_pool_ops(pool);
  if (mm->n_tokens >= QUANTIZE_POOL_MIN) {
    quantize_args a = {.ops = ops, .mm = mm};
    nk_pool_run(pool, quantize_task, &a);
    return;
  }
  for (int64_t t = 0; t < mm->n_tokens; t++) quantize_token(ops, mm, t);
}

static void quantize(mm_task *a) {
  nk_mm_quantize(a->pool, &a->mm[0]);
}

/* Repacked items are whole pairs of 16-row groups, which the many-token Q4_K tiles take
 * together (kern_avx512_r16_pair.c); against single groups, a product of 1-5 tokens measured
 * the same (0.95-1.02x, Q8_0, Q4_K and Q6_K from memory). */
int64_t nk_item_rows(const nk_mm *mm) {
  const int64_t rows = mm->row_bytes >= ITEM_BYTES ? 1 : ITEM_BYTES / mm->row_bytes;
  return mm->tr->r16 ? (rows + 31) / 32 * 32 : rows;
}

/* Item i's matrix (its index found from m on) and first row. */
static const nk_mm *item_at(const mm_task *a, int64_t i, int32_t *m, int64_t *r0) {
  while (i < a->first[*m]) (*m)--;
  while (i >= a->first[*m + 1]) (*m)++;
  *r0 = (i - a->first[*m]) * a->per[*m];
  return &a->mm[*m];
}

/* With quantize_in_task, the calling thread quantizes the activations while the others
 * request the weights of the item each will start with: a decode step's product no longer
 * waits for one thread's quantization before the others start, nor for their wake-up. */
static void share_quantization(mm_task *a, int32_t ith, int64_t first_item) {
  if (ith == 0) {
    quantize(a);
    atomic_store_explicit(&a->act_ready, 1, memory_order_release);
    return;
  }
  const uint8_t *p = NULL;
  int64_t n = 0;
  if (first_item >= 0) {
    int32_t m = 0;
    int64_t r0;
    const nk_mm *mm = item_at(a, first_item, &m, &r0);
    p = mm->w + r0 * mm->row_bytes;
    n = a->per[m] * mm->row_bytes;
  }
  for (int64_t o = 0; !atomic_load_explicit(&a->act_ready, memory_order_acquire);) {
    if (o < n) {
      __builtin_prefetch(p + o, 0, 3);
      o += 64;
    } else {
      _mm_pause();
    }
  }
}

static void rows_task(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  mm_task *a = arg;
  const uint8_t *last = NULL;
  int32_t m = 0;
  int64_t i = nk_pool_claim(a->pool, ith);
  if (a->quantize_in_task) share_quantization(a, ith, i);
  for (; i >= 0; i = nk_pool_claim(a->pool, ith)) {
    int64_t r0;
    const nk_mm *mm = item_at(a, i, &m, &r0);
    const int64_t r1 = r0 + a->per[m] < mm->rows ? r0 + a->per[m] : mm->rows;
    nk_mm_rows(a->ops, mm, r0, r1, &last);
  }
}

static void panels_task(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  mm_task *a = arg;
  const nk_mm *mm = &a->mm[a->cur];
  const int32_t pr = a->ops->panel_rows;
  const int64_t n_panels = (mm->rows + pr - 1) / pr;
  void *scratch = nk_pool_scratch(a->pool, ith);
  for (int64_t p = nk_pool_next(a->pool); p < n_panels; p = nk_pool_next(a->pool)) {
    if (mm->tr->quant) {
      a->ops->qgemm_panel(mm, p * pr, scratch);
    } else {
      a->ops->fgemm_panel(mm, p * pr, scratch);
    }
  }
}

/* The bytes of each field of nk_qact, in the order nk_qact_place lays them out; the
 * per-256 ones 0 without per_256. */
typedef struct {
  int64_t q, f16, f32, dk, bsum, bsum32, q4k;
} qact_sizes;

static qact_sizes qact_sizes_of(int64_t n_tokens, int64_t kp, int per_256) {
  const int64_t q = nk_round_up(n_tokens * kp, NK_ALIGN);
  return (qact_sizes){
      .q = q,
      .f16 = nk_round_up(n_tokens * (kp / 16) * 4, NK_ALIGN),
      .f32 = nk_round_up(n_tokens * (kp / 32) * 4, NK_ALIGN),
      .dk = per_256 ? nk_round_up(n_tokens * (kp / 256) * 4, NK_ALIGN) : 0,
      .bsum = per_256 ? nk_round_up(n_tokens * (kp / 16) * 2, NK_ALIGN) : 0,
      .bsum32 = per_256 ? nk_round_up(n_tokens * (kp / 32) * 2, NK_ALIGN) : 0,
      .q4k = per_256 ? q : 0,
  };
}

int64_t nk_qact_bytes(int64_t n_tokens, int64_t kp, int per_256) {
  const qact_sizes z = qact_sizes_of(n_tokens, kp, per_256);
  return z.q + 2 * z.f16 + 2 * z.f32 + z.dk + z.bsum + z.bsum32 + z.q4k;
}

void nk_qact_place(uint8_t *buf, int64_t n_tokens, int64_t kp, int per_256, nk_qact *act) {
  const qact_sizes z = qact_sizes_of(n_tokens, kp, per_256);
  act->kp = kp;
  act->q = (int8_t *)buf;
  buf += z.q;
  act->d16 = (float *)buf;
  act->s16 = (float *)(buf + z.f16);
  buf += 2 * z.f16;
  act->d32 = (float *)buf;
  act->s32 = (float *)(buf + z.f32);
  buf += 2 * z.f32;
  act->dk = per_256 ? (float *)buf : NULL;
  act->bsum = per_256 ? (int16_t *)(buf + z.dk) : NULL;
  act->bsum32 = per_256 ? (int16_t *)(buf + z.dk + z.bsum) : NULL;
  act->q4k = per_256 ? (int8_t *)(buf + z.dk + z.bsum + z.bsum32) : NULL;
}

nk_qact nk_qact_from(const nk_qact *act, int64_t t0) {
  const int64_t kp = act->kp;
  nk_qact v = *act;
  v.q += t0 * kp;
  v.d16 += t0 * (kp / 16);
  v.s16 += t0 * (kp / 16);
  v.d32 += t0 * (kp / 32);
  v.s32 += t0 * (kp / 32);
  if (v.dk) {
    v.dk += t0 * (kp / 256);
    v.bsum += t0 * (kp / 16);
    v.bsum32 += t0 * (kp / 32);
    v.q4k += t0 * kp;
  }
  return v;
}

void nk_qact_copy(const nk_qact *src, int64_t t, const nk_qact *dst, int64_t i) {
  const int64_t kp = src->kp;
  memcpy(dst->q + i * kp, src->q + t * kp, (size_t)kp);
  memcpy(dst->d16 + i * (kp / 16), src->d16 + t * (kp / 16), (size_t)(kp / 16) * 4);
  memcpy(dst->s16 + i * (kp / 16), src->s16 + t * (kp / 16), (size_t)(kp / 16) * 4);
  memcpy(dst->d32 + i * (kp / 32), src->d32 + t * (kp / 32), (size_t)(kp / 32) * 4);
  memcpy(dst->s32 + i * (kp / 32), src->s32 + t * (kp / 32), (size_t)(kp / 32) * 4);
  if (src->dk) {
    memcpy(dst->dk + i * (kp / 256), src->dk + t * (kp / 256), (size_t)(kp / 256) * 4);
    memcpy(dst->bsum + i * (kp / 16), src->bsum + t * (kp / 16), (size_t)(kp / 16) * 2);
    memcpy(dst->bsum32 + i * (kp / 32), src->bsum32 + t * (kp / 32), (size_t)(kp / 32) * 2);
    memcpy(dst->q4k + i * kp, src->q4k + t * kp, (size_t)kp);
  }
}

/* Lays the quantized activations out in the pool's shared buffer; with `per_256`, the
 * per-256 fields too (nk_qact). */
static int32_t alloc_act(nk_pool *pool, nk_mm *mm, int per_256) {
  uint8_t *buf = nk_pool_shared(pool, nk_qact_bytes(mm->n_tokens, mm->kp, per_256));
  if (!buf) return NK_ENOMEM;
  nk_qact_place(buf, mm->n_tokens, mm->kp, per_256, &mm->act);
  return NK_OK;
}

int32_t nk_mm_setup(nk_mm *mm, int32_t type, const void *w, int64_t rows, int64_t cols,
                    const float *x, int64_t n_tokens, float *y) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (rb < 0 || rows <= 0 || n_tokens <= 0 || !w || !x || !y) return NK_EINVAL;
  if (nk_type_traits(type)->r16 && rows % 16 != 0) return NK_EINVAL;
  *mm = (nk_mm){.type = type,
                .tr = nk_type_traits(type),
                .w = w,
                .rows = rows,
                .cols = cols,
                .row_bytes = rb,
                .kp = nk_round_up(cols, NK_CHUNK),
                .x = x,
                .n_tokens = n_tokens,
                .y = y};
  return NK_OK;
}

static int64_t panel_bytes(const mm_task *a, const nk_mm *mm) {
  return mm->tr->quant ? nk_qpanel_bytes(a->ops->panel_rows, mm->kp)
                       : nk_fpanel_bytes(a->ops->panel_rows, mm->cols);
}

int32_t nk_matmul_many(nk_pool *pool, int32_t n, const int32_t *types, const void *const *ws,
                       const int64_t *rows, int64_t cols, const float *x, int64_t n_tokens,
                       float *const *ys) {
  if (!pool || n <= 0 || n > NK_MANY_MAX || !types || !ws || !rows || !ys) return NK_EINVAL;
  mm_task a = {.pool = pool, .ops = nk_pool_ops(pool), .n = n};
  /* Matrices sharing the activations take one path, the panels when every type's
   * threshold is reached; repacked ones always go by rows, their layout already the
   * panels'. */
  int packed = a.ops->panel_rows > 0;
  int quant = 0, k_only = 1;
  int64_t scratch = 0;
  for (int32_t m = 0; m < n; m++) {
    if (nk_mm_setup(&a.mm[m], types[m], ws[m], rows[m], cols, x, n_tokens, ys[m]) != NK_OK)
      return NK_EINVAL;
    nk_pool_prefetch_distances(pool, &a.mm[m]);
    quant |= a.mm[m].tr->quant;
    k_only &= a.mm[m].tr->quant && a.mm[m].tr->block_size == 256;
    if (packed && !a.mm[m].tr->r16 && n_tokens < a.ops->pack_min_tokens(types[m])) packed = 0;
    /* Repacked matrices need no panel scratch. */
    const int64_t pb = a.mm[m].tr->r16 ? 0 : panel_bytes(&a, &a.mm[m]);
    if (pb > scratch) scratch = pb;
  }
  if (packed && nk_pool_reserve(pool, scratch) != NK_OK) return NK_ENOMEM;
  /* Float types read x itself; the quantized ones share one quantization of it. */
  if (quant) {
    if (alloc_act(pool, &a.mm[0], k_only) != NK_OK) return NK_ENOMEM;
    for (int32_t m = 1; m < n; m++) a.mm[m].act = a.mm[0].act;
    a.quantize_in_task = !packed && n_tokens <= NK_ROW_TOKENS && nk_pool_threads(pool) > 1;
    if (!a.quantize_in_task) quantize(&a);
  }
  if (packed) {
    /* Panels amortize over many tokens: the matrices go one after the other. */
    for (a.cur = 0; a.cur < n; a.cur++) {
      if (!a.mm[a.cur].tr->r16) nk_pool_run(pool, panels_task, &a);
    }
  }
  a.first[0] = 0;
  for (int32_t m = 0; m < n; m++) {
    const int by_rows = !packed || a.mm[m].tr->r16;
    a.per[m] = nk_item_rows(&a.mm[m]);
    a.first[m + 1] = a.first[m] + (by_rows ? (a.mm[m].rows + a.per[m] - 1) / a.per[m] : 0);
  }
  if (a.first[n] == 0) return NK_OK;
  nk_pool_split(pool, a.first[n], 1);
  nk_pool_run(pool, rows_task, &a);
  return NK_OK;
}

int32_t nk_matmul(nk_pool *pool, int32_t type, const void *w, int64_t rows, int64_t cols,
                  const float *x, int64_t n_tokens, float *y) {
  return nk_matmul_many(pool, 1, &type, &w, &rows, cols, x, n_tokens, &y);
}
