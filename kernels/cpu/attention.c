/*
 * nk_kv_store, nk_attention: the paged KV cache's two ops, over every sequence of a step at
 * once. A continuous-batching decode step carries one token for each of many sequences;
 * an op per sequence would wake the pool that many times per layer for a few microseconds
 * of work each, where one op spreads all (kv head, run of tokens) items of all sequences
 * over it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nk_internal.h"

/* Each sequence is a triple (row_start, row_count, table_len) in `seqs`; its block table
 * follows the previous one's in `tables`. */
enum { SEQ_ROW_START = 0, SEQ_ROW_COUNT = 1, SEQ_TABLE_LEN = 2, SEQ_WORDS = 3 };

/* Checks what the kernels index by: every position's block lies inside its table. */
static int32_t check_seqs(int32_t kv_type, int64_t block_size, int32_t n_seqs,
                          const int32_t *seqs, const int32_t *tables, const int32_t *positions,
                          int64_t n_kv_heads, int64_t head_dim) {
  if ((kv_type != NK_F32 && kv_type != NK_F16 && !nk_kv_quantized(kv_type)) ||
      block_size <= 0 || n_seqs < 0 || (n_seqs > 0 && (!seqs || !tables || !positions)) ||
      n_kv_heads <= 0 || head_dim <= 0 || (nk_kv_quantized(kv_type) && head_dim % 32 != 0)) {
    return NK_EINVAL;
  }
  for (int32_t s = 0; s < n_seqs; s++) {
    const int32_t *seq = seqs + SEQ_WORDS * s;
    if (seq[SEQ_ROW_START] < 0 || seq[SEQ_ROW_COUNT] < 0 || seq[SEQ_TABLE_LEN] < 0) {
      return NK_EINVAL;
    }
    for (int32_t t = 0; t < seq[SEQ_ROW_COUNT]; t++) {
      const int32_t pos = positions[seq[SEQ_ROW_START] + t];
      if (pos < 0 || pos / block_size >= seq[SEQ_TABLE_LEN]) return NK_EINVAL;
    }
  }
  return NK_OK;
}

typedef struct {
  const nk_isa_ops *ops;
  void *k_cache, *v_cache;
  int32_t kv_type;
  int64_t width;
  /* Cache slot of each row. */
  const int64_t *slots;
  int64_t n_rows;
  const float *k, *v;
} store_args;

static void store_row(const nk_isa_ops *ops, void *cache, int32_t kv_type, int64_t slot,
                      int64_t width, const float *src) {
  if (kv_type == NK_F32) {
    memcpy((float *)cache + slot * width, src, (size_t)width * 4);
  } else if (kv_type == NK_F16) {
    ops->f16_store((uint16_t *)cache + slot * width, src, width);
  } else {
    /* Heads are whole blocks, so a position's row is too. */
    nk_kv_quantize_row(kv_type, src, width, (uint8_t *)cache + slot * nk_kv_head_bytes(kv_type, width));
  }
}

static void store_task(void *arg, int32_t ith, int32_t nth) {
  const store_args *s = arg;
  int64_t r0, r1;
  nk_row_share(s->n_rows, ith, nth, &r0, &r1);
  for (int64_t r = r0; r < r1; r++) {
    if (s->slots[r] < 0) continue;
    store_row(s->ops, s->k_cache, s->kv_type, s->slots[r], s->width, s->k + r * s->width);
    store_row(s->ops, s->v_cache, s->kv_type, s->slots[r], s->width, s->v + r * s->width);
  }
}

int32_t nk_kv_store(nk_pool *pool, void *k_cache, void *v_cache, int32_t kv_type,
                    int64_t block_size, int32_t n_seqs, const int32_t *seqs, const int32_t *tables,
                    const int32_t *positions, int64_t n_kv_heads, int64_t head_dim, const float *k,
                    const float *v) {
  if (!pool || !k_cache || !v_cache || !k || !v ||
      check_seqs(kv_type, block_size, n_seqs, seqs, tables, positions, n_kv_heads, head_dim) !=
          NK_OK) {
    return NK_EINVAL;
  }
  int64_t n_rows = 0;
  for (int32_t s = 0; s < n_seqs; s++) {
    const int32_t *seq = seqs + SEQ_WORDS * s;
    const int64_t end = (int64_t)seq[SEQ_ROW_START] + seq[SEQ_ROW_COUNT];
    if (end > n_rows) n_rows = end;
  }
  int64_t *slots = malloc((size_t)(n_rows > 0 ? n_rows : 1) * sizeof(int64_t));
  if (!slots) return NK_ENOMEM;
  /* Rows no sequence claims keep their cache untouched. */
  for (int64_t r = 0; r < n_rows; r++) slots[r] = -1;
  const int32_t *table = tables;
  for (int32_t s = 0; s < n_seqs; s++) {
    const int32_t *seq = seqs + SEQ_WORDS * s;
    for (int32_t t = 0; t < seq[SEQ_ROW_COUNT]; t++) {
      const int64_t r = seq[SEQ_ROW_START] + t, pos = positions[r];
      slots[r] = (int64_t)table[pos / block_size] * block_size + pos % block_size;
    }
    table += seq[SEQ_TABLE_LEN];
  }
  store_args a = {nk_pool_ops(pool), k_cache, v_cache, kv_type, n_kv_heads * head_dim,
                  slots,             n_rows,  k,       v};
  nk_pool_run_sized(pool, store_task, &a, n_rows * a.width);
  free(slots);
  return NK_OK;
}

int64_t nk_attend_scratch_floats(const nk_attn *a) {
  const int64_t r = nk_attn_tile_tokens(a) * (a->n_heads / a->n_kv_heads), d = a->head_dim;
  const int64_t item = 2 * r * d + r * NK_ATTN_TILE + 2 * r + NK_ATTN_TILE * d;
  /* attend_split: each kv head's state and its scores of a tile. */
  const int64_t split = a->n_kv_heads * (nk_attn_split_head_floats(NK_ATTN_SPLIT_ROWS, d) +
                                         NK_ATTN_SPLIT_ROWS * NK_ATTN_TILE);
  return item > split ? item : split;
}

/* A decode sequence's positions go to spans of at least this many, at most this many
 * spans: enough items to keep every thread busy on one long context, and a span count
 * that depends on the context alone, so that the result does not depend on the threads.
 * Each span costs its setup, its partial softmax and its share of the merge: at 8k
 * positions 32 spans take 0.96x the time of 64 (2 threads, 28 layers). */
#define SPLIT_MIN 128
#define SPLITS_MAX 32

/* How many spans a sequence's attention splits into: 0 when it goes kv head by kv head. */
static int64_t split_count(const nk_attn *a) {
  if (a->n_tokens == 0 || a->n_tokens * (a->n_heads / a->n_kv_heads) > NK_ATTN_SPLIT_ROWS) {
    return 0;
  }
  int64_t first, end;
  nk_attn_seen(a, 0, a->n_tokens, &first, &end);
  const int64_t n = (end - first + SPLIT_MIN - 1) / SPLIT_MIN;
  return n < 1 ? 1 : n > SPLITS_MAX ? SPLITS_MAX : n;
}

/* Span i of n: the seen positions cut evenly, inner edges on multiples of 16 (whole
 * blocks of the usual block size). */
static void split_bounds(const nk_attn *a, int64_t i, int64_t n, int64_t *p0, int64_t *p1) {
  int64_t first, end;
  nk_attn_seen(a, 0, a->n_tokens, &first, &end);
  const int64_t w = end - first;
  *p0 = i == 0 ? first : first + w * i / n / 16 * 16;
  *p1 = i == n - 1 ? end : first + w * (i + 1) / n / 16 * 16;
}

typedef struct {
  nk_pool *pool;
  int32_t n_seqs;
  /* One view per sequence (its rows, table and positions); items [first[s], first[s+1]). */
  const nk_attn *attn;
  const int64_t *first;
  /* Per sequence: its spans (0: kv head by kv head), and where in `parts` its spans' partial
   * softmaxes go when there is more than one. */
  const int64_t *splits, *part_at;
  float *parts;
} attn_task_args;

/* Floats one span's partial softmax of all rows of `a` takes. */
static int64_t part_floats(const nk_attn *a) {
  return a->n_tokens * a->n_heads * (a->head_dim + 2);
}

static void attn_task(void *arg, int32_t ith, int32_t nth) {
  (void)nth;
  const attn_task_args *t = arg;
  const nk_isa_ops *ops = nk_pool_ops(t->pool);
  float *scratch = nk_pool_scratch(t->pool, ith);
  int32_t s = 0;
  /* Each thread takes a run of consecutive items (nk_pool_split), so that a span's last tile
   * can request the next span's first for the same thread; a stolen item may lie behind the
   * sequence cursor, which then starts over. With that request, against items dealt out
   * alternately: 8k positions 0.89x the time (q8_0 0.82x), 2k 0.97x, 16 sequences of 600
   * 0.98x, 512 and 32k unchanged. */
  for (int64_t i = nk_pool_claim(t->pool, ith); i >= 0; i = nk_pool_claim(t->pool, ith)) {
    if (i < t->first[s]) s = 0;
    while (i >= t->first[s + 1]) s++;
    const nk_attn *a = &t->attn[s];
    const int64_t j = i - t->first[s], n = t->splits[s];
    if (n > 0) {
      int64_t p0, p1;
      split_bounds(a, j, n, &p0, &p1);
      float *part = n > 1 ? t->parts + t->part_at[s] + j * part_floats(a) : NULL;
      ops->attend_split(a, p0, p1, scratch, part);
      continue;
    }
    const int64_t tile = nk_attn_tile_tokens(a);
    /* Latest tokens first: they attend to the most positions, so the tail balances. */
    const int64_t t0 = ((a->n_tokens - 1) / tile - j / a->n_kv_heads) * tile;
    const int64_t nt = a->n_tokens - t0 < tile ? a->n_tokens - t0 : tile;
    ops->attend_item(a, t0, nt, j % a->n_kv_heads, scratch);
  }
}

/* The spans' partial softmaxes of one row merged: each span's sums weighted by
 * exp(its maximum - the overall maximum). */
static void merge_row(const float *parts, int64_t n, int64_t stride, int64_t d, float *out) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; i++) m = parts[i * stride] > m ? parts[i * stride] : m;
  float sum = 0.0f;
  for (int64_t k = 0; k < d; k++) out[k] = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    const float *p = parts + i * stride;
    if (p[1] == 0.0f) continue;
    const float w = expf(p[0] - m);
    sum += p[1] * w;
    for (int64_t k = 0; k < d; k++) out[k] += p[2 + k] * w;
  }
  const float inv = 1.0f / sum;
  for (int64_t k = 0; k < d; k++) out[k] *= inv;
}

static void merge_task(void *arg, int32_t ith, int32_t nth) {
  (void)ith;
  (void)nth;
  const attn_task_args *t = arg;
  /* Item s: sequence s, when it was split. */
  for (int64_t s = nk_pool_next(t->pool); s < t->n_seqs; s = nk_pool_next(t->pool)) {
    if (t->splits[s] < 2) continue;
    const nk_attn *a = &t->attn[s];
    const int64_t d = a->head_dim, rows = a->n_tokens * a->n_heads;
    for (int64_t r = 0; r < rows; r++) {
      merge_row(t->parts + t->part_at[s] + r * (d + 2), t->splits[s], part_floats(a), d,
                a->out + r * d);
    }
  }
}

int32_t nk_attention(nk_pool *pool, float *out, const float *q, const void *k_cache,
                     const void *v_cache, int32_t kv_type, int64_t block_size, int32_t n_seqs,
                     const int32_t *seqs, const int32_t *tables, const int32_t *positions,
                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                     int64_t window) {
  if (!pool || !out || !q || !k_cache || !v_cache || n_heads <= 0 ||
      check_seqs(kv_type, block_size, n_seqs, seqs, tables, positions, n_kv_heads, head_dim) !=
          NK_OK ||
      n_heads % n_kv_heads != 0 || !isfinite(scale) || window < 0) {
    return NK_EINVAL;
  }
  if (n_seqs == 0) return NK_OK;
  nk_attn *attn = malloc((size_t)n_seqs * sizeof(nk_attn));
  /* first, then splits, then part_at: n_seqs + 1, n_seqs and n_seqs words. */
  int64_t *first = malloc((size_t)(3 * n_seqs + 1) * sizeof(int64_t));
  float *q8 = NULL, *parts = NULL;
  int32_t rc = attn && first ? NK_OK : NK_ENOMEM;
  if (rc == NK_OK && nk_kv_quantized(kv_type)) {
    /* Against a quantized K, llama.cpp takes Q.K as a q8_0 . q8_0 (or q4_0) dot product:
     * the queries are rounded through q8_0 first, and so they are here. */
    int64_t rows = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
      const int32_t *seq = seqs + SEQ_WORDS * s;
      if (seq[SEQ_ROW_START] + seq[SEQ_ROW_COUNT] > rows) rows = seq[SEQ_ROW_START] + seq[SEQ_ROW_COUNT];
    }
    q8 = malloc((size_t)(rows > 0 ? rows : 1) * (size_t)(n_heads * head_dim) * sizeof(float));
    if (!q8) rc = NK_ENOMEM;
    else nk_q8_0_round(q, rows * n_heads * head_dim, q8);
    q = q8;
  }
  int64_t *splits = first + n_seqs + 1, *part_at = splits + n_seqs, part_total = 0;
  const int32_t *table = tables;
  if (rc == NK_OK) first[0] = 0;
  for (int32_t s = 0; rc == NK_OK && s < n_seqs; s++) {
    const int32_t *seq = seqs + SEQ_WORDS * s;
    const int64_t row = seq[SEQ_ROW_START], width = n_heads * head_dim;
    attn[s] = (nk_attn){out + row * width, q + row * width, k_cache, v_cache, kv_type,
                        block_size, table, positions + row, seq[SEQ_ROW_COUNT], n_heads,
                        n_kv_heads, head_dim, scale, window};
    const int64_t tile = nk_attn_tile_tokens(&attn[s]);
    splits[s] = split_count(&attn[s]);
    part_at[s] = part_total;
    if (splits[s] > 1) part_total += splits[s] * part_floats(&attn[s]);
    first[s + 1] = first[s] + (splits[s] > 0 ? splits[s]
                                             : (seq[SEQ_ROW_COUNT] + tile - 1) / tile * n_kv_heads);
    table += seq[SEQ_TABLE_LEN];
  }
  if (rc == NK_OK && part_total > 0) {
    parts = malloc((size_t)part_total * sizeof(float));
    if (!parts) rc = NK_ENOMEM;
  }
  if (rc == NK_OK) rc = nk_pool_reserve(pool, nk_attend_scratch_floats(&attn[0]) * 4);
  if (rc == NK_OK) {
    attn_task_args t = {pool, n_seqs, attn, first, splits, part_at, parts};
    nk_pool_split(pool, first[n_seqs], 0);
    nk_pool_run(pool, attn_task, &t);
    if (part_total > 0) nk_pool_run(pool, merge_task, &t);
  }
  free(attn);
  free(first);
  free(q8);
  free(parts);
  return rc;
}
