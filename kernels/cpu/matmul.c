/*
 * nk_matmul: validates, quantizes the activations into pool scratch, then splits the rows
 * over the pool. Few tokens go row by row (every weight byte read once per call, the
 * bandwidth-bound decode case); many tokens go panel by panel through the packed mat-mat
 * kernels, which reuse each unpacked weight for every token.
 */
#include "nk_internal.h"

/* The row-by-row path streams weights from memory in blocks of about PREFETCH_BYTES: the
 * blocks LOOKAHEAD ahead are requested in one tight burst of prefetches, then the current
 * block is computed from cache. Measured on the 2-core Sapphire Rapids VM: with hardware
 * prefetch alone a Q4_K mat-vec thread streamed 4.4 GB/s, with bursts 7.1 GB/s; spreading
 * the same prefetches through the compute loop gained nothing over bursts. */
#define PREFETCH_BYTES 4096
#define LOOKAHEAD 2
/* Work items per thread: dynamic claiming absorbs a thread that runs late. */
#define ITEMS_PER_THREAD 4
/* From this many tokens on, packing a panel pays for itself (measured: below it, passes
 * of four tokens over the streamed weights are faster). */
#define PACK_MIN_TOKENS 9
/* Tokens one row-by-row pass carries. */
#define ROW_TOKENS 4

/* Rows [r0, min(r0 + n, end)) into cache. */
static inline void prefetch_rows(const nk_mm *mm, int64_t r0, int64_t n, int64_t end) {
  const int64_t r1 = r0 + n < end ? r0 + n : end;
  const uint8_t *p = mm->w + r0 * mm->row_bytes;
  for (int64_t o = 0; o < (r1 - r0) * mm->row_bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

typedef struct {
  nk_pool *pool;
  const nk_isa_ops *ops;
  nk_mm mm;
} mm_task;

int64_t nk_qpanel_bytes(int32_t panel_rows, int64_t kp) {
  return kp * panel_rows + 2 * (kp / 16) * panel_rows * 4;
}

int64_t nk_fpanel_bytes(int32_t panel_rows, int64_t cols) {
  return cols * panel_rows * 4;
}

static void quantize_task(void *arg, int32_t ith, int32_t nth) {
  (void)ith;
  (void)nth;
  mm_task *a = arg;
  const nk_mm *mm = &a->mm;
  const int64_t kp = mm->kp;
  for (int64_t t = nk_pool_next(a->pool); t < mm->n_tokens; t = nk_pool_next(a->pool)) {
    a->ops->quantize_act(mm->x + t * mm->cols, mm->cols, kp, mm->act.q + t * kp,
                         mm->act.d16 + t * (kp / 16), mm->act.s16 + t * (kp / 16),
                         mm->act.d32 + t * (kp / 32), mm->act.s32 + t * (kp / 32));
  }
}

static void rows_task(void *arg, int32_t ith, int32_t nth) {
  (void)ith;
  mm_task *a = arg;
  const nk_mm *mm = &a->mm;
  int64_t block = PREFETCH_BYTES / mm->row_bytes;
  if (block < 1) block = 1;
  int64_t n_items = nth * ITEMS_PER_THREAD;
  if (n_items > (mm->rows + block - 1) / block) n_items = (mm->rows + block - 1) / block;
  for (int64_t i = nk_pool_next(a->pool); i < n_items; i = nk_pool_next(a->pool)) {
    const int64_t end = mm->rows * (i + 1) / n_items;
    for (int64_t r0 = mm->rows * i / n_items; r0 < end; r0 += block) {
      const int64_t r1 = r0 + block < end ? r0 + block : end;
      const int64_t first = r0 == mm->rows * i / n_items ? 1 : LOOKAHEAD;
      for (int64_t l = first; l <= LOOKAHEAD; l++) prefetch_rows(mm, r0 + l * block, block, end);
      for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += ROW_TOKENS) {
        const int32_t nt =
            (int32_t)(mm->n_tokens - t0 < ROW_TOKENS ? mm->n_tokens - t0 : ROW_TOKENS);
        if (mm->tr->quant) {
          a->ops->qdot_rows(mm, r0, r1, t0, nt);
        } else {
          a->ops->fdot_rows(mm, r0, r1, t0, nt);
        }
      }
    }
  }
}

static void panels_task(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  mm_task *a = arg;
  const nk_mm *mm = &a->mm;
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

/* Lays the quantized activations out in the pool's shared buffer. */
static int32_t alloc_act(nk_pool *pool, nk_mm *mm) {
  const int64_t kp = mm->kp, n = mm->n_tokens;
  const int64_t q_bytes = nk_round_up(n * kp, NK_ALIGN);
  const int64_t f16_bytes = nk_round_up(n * (kp / 16) * 4, NK_ALIGN);
  const int64_t f32_bytes = nk_round_up(n * (kp / 32) * 4, NK_ALIGN);
  uint8_t *buf = nk_pool_shared(pool, q_bytes + 2 * f16_bytes + 2 * f32_bytes);
  if (!buf) return NK_ENOMEM;
  mm->act.kp = kp;
  mm->act.q = (int8_t *)buf;
  mm->act.d16 = (float *)(buf + q_bytes);
  mm->act.s16 = (float *)(buf + q_bytes + f16_bytes);
  mm->act.d32 = (float *)(buf + q_bytes + 2 * f16_bytes);
  mm->act.s32 = (float *)(buf + q_bytes + 2 * f16_bytes + f32_bytes);
  return NK_OK;
}

int32_t nk_matmul(nk_pool *pool, int32_t type, const void *w, int64_t rows, int64_t cols,
                  const float *x, int64_t n_tokens, float *y) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (!pool || rb < 0 || rows <= 0 || n_tokens <= 0 || !w || !x || !y) return NK_EINVAL;
  mm_task a = {.pool = pool, .ops = nk_pool_ops(pool)};
  nk_mm *mm = &a.mm;
  mm->type = type;
  mm->tr = nk_type_traits(type);
  mm->w = w;
  mm->rows = rows;
  mm->cols = cols;
  mm->row_bytes = rb;
  mm->kp = nk_round_up(cols, NK_CHUNK);
  mm->x = x;
  mm->n_tokens = n_tokens;
  mm->y = y;
  const int packed = a.ops->panel_rows > 0 && n_tokens >= PACK_MIN_TOKENS;
  if (mm->tr->quant) {
    if (alloc_act(pool, mm) != NK_OK) return NK_ENOMEM;
    if (n_tokens <= ROW_TOKENS) {
      for (int64_t t = 0; t < n_tokens; t++) {
        a.ops->quantize_act(x + t * cols, cols, mm->kp, mm->act.q + t * mm->kp,
                            mm->act.d16 + t * (mm->kp / 16), mm->act.s16 + t * (mm->kp / 16),
                            mm->act.d32 + t * (mm->kp / 32), mm->act.s32 + t * (mm->kp / 32));
      }
    } else {
      nk_pool_run(pool, quantize_task, &a);
    }
  }
  if (packed) {
    const int64_t bytes = mm->tr->quant ? nk_qpanel_bytes(a.ops->panel_rows, mm->kp)
                                        : nk_fpanel_bytes(a.ops->panel_rows, cols);
    if (nk_pool_reserve(pool, bytes) != NK_OK) return NK_ENOMEM;
    nk_pool_run(pool, panels_task, &a);
  } else {
    nk_pool_run(pool, rows_task, &a);
  }
  return NK_OK;
}
