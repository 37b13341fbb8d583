/*
 * What the attention and KV-cache code shares across files: the view one attention item
 * works on (nk_attn) and its spans of positions, the cache rows' sizes and quantization,
 * and the partial softmax a decode span leaves for the merge (attention.c).
 */
#ifndef NK_ATTENTION_H
#define NK_ATTENTION_H

#include <stdint.h>
#include <string.h>

#include "nk.h"

/* Positions one attention tile covers. */
#define NK_ATTN_TILE 64

/* Query rows (token, head) one attention item computes: a prefill chunk's tokens share
 * the K/V rows they read, so an item takes as many tokens as keep this many query heads
 * in flight, and each row it loads serves all of them instead of being re-read per token. */
#define NK_ATTN_ROWS 64

/* Attention over the paged cache for one (kv head, run of tokens): all query heads of the
 * group for each token. */
typedef struct {
  float *out;
  const float *q;
  const void *k_cache, *v_cache;
  int32_t kv_type;
  int64_t block_size;
  const int32_t *block_table, *positions;
  int64_t n_tokens, n_heads, n_kv_heads, head_dim;
  float scale;
  /* Positions a row sees, counting its own (0: all of them). */
  int64_t window;
} nk_attn;

/* The first position token t of `a` sees. */
static inline int64_t nk_attn_first(const nk_attn *a, int64_t t) {
  const int64_t first = a->window > 0 ? (int64_t)a->positions[t] - a->window + 1 : 0;
  return first > 0 ? first : 0;
}

/* The positions [*first, *end) tokens [t0, t0 + nt) of `a` together see. */
static inline void nk_attn_seen(const nk_attn *a, int64_t t0, int64_t nt, int64_t *first,
                                int64_t *end) {
  *first = INT64_MAX;
  *end = 0;
  for (int64_t t = t0; t < t0 + nt; t++) {
    if (a->positions[t] + 1 > *end) *end = (int64_t)a->positions[t] + 1;
    if (nk_attn_first(a, t) < *first) *first = nk_attn_first(a, t);
  }
}

/* The positions [p0 + lo, p0 + hi) of the tile of n from p0 that token t sees (lo == hi:
 * none). */
static inline void nk_attn_tile_span(const nk_attn *a, int64_t t, int64_t p0, int64_t n,
                                     int64_t *lo, int64_t *hi) {
  const int64_t end = a->positions[t] + 1 - p0, first = nk_attn_first(a, t) - p0;
  *hi = end < 0 ? 0 : end < n ? end : n;
  *lo = first < 0 ? 0 : first < *hi ? first : *hi;
}

/* A KV cache type kept as ggml blocks of 32 values (kv_quant.c). */
static inline int nk_kv_quantized(int32_t type) { return type == NK_Q8_0 || type == NK_Q4_0; }

/* Bytes of one head's row of head_dim values in a cache of `type`. */
static inline int64_t nk_kv_head_bytes(int32_t type, int64_t head_dim) {
  switch (type) {
    case NK_F32: return head_dim * 4;
    case NK_F16: return head_dim * 2;
    case NK_Q8_0: return head_dim / 32 * 34;
    default: return head_dim / 32 * 18;
  }
}

/* n values (a multiple of 32) into q8_0 or q4_0 blocks, as ggml's reference quantizers. */
void nk_kv_quantize_row(int32_t type, const float *src, int64_t n, void *dst);
/* n values (a multiple of 32) as the q8_0 blocks they quantize to stand for. */
void nk_q8_0_round(const float *src, int64_t n, float *dst);

/* Tokens per attention item: at least one, whatever the group size. */
static inline int64_t nk_attn_tile_tokens(const nk_attn *a) {
  const int64_t g = a->n_heads / a->n_kv_heads;
  return g >= NK_ATTN_ROWS ? 1 : NK_ATTN_ROWS / g;
}

/* Scratch floats nk_attend_item and attend_split need. */
int64_t nk_attend_scratch_floats(const nk_attn *a);

/* A sequence whose tokens bring at most this many query rows per kv head (a decode step's
 * group, a verification of a few drafted tokens) is attended span by span of positions with
 * all its kv heads together (attend_split) instead of kv head by kv head. Measured on
 * Qwen3-0.6B's shape (2 rows a token), 28 layers, 2 threads: 3 and 4 tokens at 2048
 * positions 14.2 -> 12.1 and 14.5 -> 12.3 ms against kv head by kv head, 4 tokens at 8192
 * (7 layers) 14.4 -> 12.8 (q8_0 13.4 -> 11.7); from 10 rows the kv-head items' products
 * over many rows win (5 tokens at 8192: 16.9 against 19.3 ms). Measured again for 5 tokens
 * (10 rows) at 4096 positions, libraries alternated: spans up to 16 rows 1.007x the time;
 * spans whose passes of 4 rows read each head's K and V tile converted to f32 once 0.936x,
 * but 1.125x at 512 positions and 1.04x for 3-4 tokens; kv-head items requesting their
 * tiles spread over the transposition and weighted sum instead of in bursts, or into L2,
 * 0.99-1.01x. Such a verification costs 2.1-2.8x a one-token step at 4096-8192 positions,
 * 1.3-1.45x at 0. */
#define NK_ATTN_SPLIT_ROWS 8

/* Scratch floats attend_split keeps per kv head for `rows` query rows of d values: each
 * row's accumulator and copied query, its running maximum and sum, and the query again as
 * q8_0 for a q8_0 cache (at most d floats). */
static inline int64_t nk_attn_split_head_floats(int64_t rows, int64_t d) {
  return rows * (3 * d + 2);
}

/* A partial softmax of one query row over a span of positions, as attend_split leaves it
 * for the merge: the row's maximum score, its sum of exp(score - maximum), then the d
 * values of its weighted sum of V rows. */
static inline void nk_attn_part_put(float *part, int64_t row, int64_t d, float max, float sum,
                                    const float *acc) {
  float *p = part + row * (d + 2);
  p[0] = max;
  p[1] = sum;
  memcpy(p + 2, acc, (size_t)d * 4);
}

#endif
