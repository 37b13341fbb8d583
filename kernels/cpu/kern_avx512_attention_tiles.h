/*
 * The tile steps both AVX-512 attention kernels share (kern_avx512_attention.c for runs of
 * tokens, kern_avx512_attention_split.c for a decode step's span of positions): cache rows
 * located and requested, a few query rows' scores against them, the online softmax, and
 * the probabilities' weighted sum of V rows.
 */
#ifndef KERN_AVX512_ATTENTION_TILES_H
#define KERN_AVX512_ATTENTION_TILES_H

#include <math.h>

#include "isa_common.h"
#include "isa_exp.h"
#include "kern_avx512.h"

#define MAX_DIM 256
/* Query heads whose outputs stay in registers while a V row is added to them. */
#define HEADS_PER_PASS 4

/* Rows of n_rows that the pass from row g0 takes, HEADS_PER_PASS at most. */
static inline int64_t rows_in_pass(int64_t n_rows, int64_t g0) {
  return n_rows - g0 < HEADS_PER_PASS ? n_rows - g0 : HEADS_PER_PASS;
}

/* A block's f16 scale in every lane: broadcast as f16, then converted (two instructions, where
 * converting the scalar first and broadcasting the float takes four). */
static inline __m512 block_scale(uint16_t d) {
  return _mm512_cvtph_ps(_mm256_set1_epi16((short)d));
}

/* Sixteen values [i, i + 16) of a cache row of kv type `type` as f32: f16 converted in
 * place, a quantized block's half (ints times its scale) decoded in registers, so a decode
 * step reads each cache byte once and writes nothing back. */
static inline __m512 load16(const void *row, int64_t i, int type) {
  if (type == NK_F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
  }
  if (type == NK_Q8_0) {
    const nk_block_q8_0 *b = (const nk_block_q8_0 *)row + (i >> 5);
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + (i & 31))));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), block_scale(b->d));
  }
  if (type == NK_Q4_0) {
    const nk_block_q4_0 *b = (const nk_block_q4_0 *)row + (i >> 5);
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    /* Values 0-15 are the low nibbles, 16-31 the high ones, both biased by 8. */
    const __m512i q = (i & 16) ? _mm512_srli_epi32(bytes, 4)
                               : _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
    const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(8)));
    return _mm512_mul_ps(v, block_scale(b->d));
  }
  return _mm512_loadu_ps((const float *)row + i);
}

/* Requests every cache line of a row. */
static inline void prefetch_row(const void *row, int64_t row_bytes) {
  const uintptr_t end = (uintptr_t)row + (uintptr_t)row_bytes;
  for (uintptr_t l = (uintptr_t)row & ~(uintptr_t)63; l < end; l += 64) {
    __builtin_prefetch((const void *)l);
  }
}

/* Requests every cache line of a row into L2 only: the rows of the next pass would evict the
 * current pass's from L1, which holds one 64-position tile of K and V just about. */
static inline void prefetch_row_l2(const void *row, int64_t row_bytes) {
  const uintptr_t end = (uintptr_t)row + (uintptr_t)row_bytes;
  for (uintptr_t l = (uintptr_t)row & ~(uintptr_t)63; l < end; l += 64) {
    __builtin_prefetch((const void *)l, 0, 2);
  }
}

/* The rows of positions [p0, p0 + n) of kv head kvh, each prefetched if asked. */
static inline void tile_rows(const nk_attn *a, const void *cache, int64_t p0, int64_t n,
                             int64_t kvh, int64_t row_bytes, int prefetch, const uint8_t **rows) {
  int64_t logical = p0 / a->block_size, slot = p0 % a->block_size;
  for (int64_t j = 0; j < n; j++) {
    const int64_t at = (a->block_table[logical] * a->block_size + slot) * a->n_kv_heads + kvh;
    rows[j] = (const uint8_t *)cache + at * row_bytes;
    if (prefetch) prefetch_row(rows[j], row_bytes);
    if (++slot == a->block_size) {
      slot = 0;
      logical++;
    }
  }
}

/* A block's 16 sums p[g * R + j] (R = 16 / G key rows) reduced, scaled and stored as
 * out[g][j] for its first n rows. */
static inline void block_scores_put(const __m512 *p, const int G, int64_t n, float scale,
                                    float *out) {
  const int R = 16 / G;
  float sums[16];
  _mm512_storeu_ps(sums, _mm512_mul_ps(nk_sum16_ps(p), _mm512_set1_ps(scale)));
  for (int g = 0; g < G; g++) {
    for (int j = 0; j < R && j < n; j++) out[g * NK_ATTN_TILE + j] = sums[g * R + j];
  }
}

/* scores[g][j] = scale * q_g . k_j for G <= 4 query rows and the 16 / G key rows at
 * rows[j] + off (a tail repeats a real row; only the first n are stored), nd sixteen-value
 * chunks per row: each K chunk converted once for all G, the G x (16 / G) sums reduced
 * together. */
static inline __attribute__((always_inline)) void scores_block(const float *q, const int G,
                                                               const uint8_t *const *rows,
                                                               int64_t off, int64_t n,
                                                               const int nd,
                                                               int type, float scale,
                                                               float *out) {
  const int R = 16 / G;
  __m512 p[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) p[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int c = 0; c < nd; c++) {
#pragma GCC unroll 16
    for (int j = 0; j < R; j++) {
      const __m512 k = load16(rows[j] + off, 16 * c, type);
#pragma GCC unroll 4
      for (int g = 0; g < G; g++) {
        p[g * R + j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + (g * nd + c) * 16), k, p[g * R + j]);
      }
    }
  }
  block_scores_put(p, G, n, scale, out);
}

/* One block of scores_block for g_n query rows and d / 16 chunks, as constants. */
static inline void scores_rows(const float *q, int64_t g_n, int64_t d,
                               const uint8_t *const *rows, int64_t off, int64_t n, int type,
                               float scale, float *out) {
#define SCORES_ND(G)                                                           \
  switch (d / 16) {                                                            \
    case 2: scores_block(q, G, rows, off, n, 2, type, scale, out); break;           \
    case 4: scores_block(q, G, rows, off, n, 4, type, scale, out); break;           \
    default: scores_block(q, G, rows, off, n, 8, type, scale, out); break;          \
  }
  switch (g_n) {
    case 1: SCORES_ND(1) break;
    case 2: SCORES_ND(2) break;
    case 3: SCORES_ND(3) break;
    default: SCORES_ND(4) break;
  }
#undef SCORES_ND
}

/* Before a tile's scores in blocks of `block` rows: rows past n up to a whole block repeat
 * rows[0], and the rows of next (off into each) that no block's turn reaches are
 * requested. */
static inline void tile_scores_begin(const uint8_t **rows, int64_t n, int64_t block,
                                     const uint8_t *const *next, int64_t n_next, int64_t off,
                                     int64_t row_bytes) {
  for (int64_t j = n; j < nk_round_up(n, block); j++) rows[j] = rows[0];
  for (int64_t j = nk_round_up(n, block); j < n_next; j++) prefetch_row_l2(next[j] + off, row_bytes);
}

/* The turn of the block from j0: requests next's rows [j0, j0 + block). */
static inline void tile_block_request(const uint8_t *const *next, int64_t j0, int64_t block,
                                      int64_t n_next, int64_t off, int64_t row_bytes) {
  for (int64_t j = j0; j < j0 + block && j < n_next; j++) prefetch_row_l2(next[j] + off, row_bytes);
}

/* scores[g][j] = scale * q_g . k_j for the tile's n rows (at rows[j] + off) and
 * g_n <= HEADS_PER_PASS query rows, requesting the rows next[0, n_next) + off (row_bytes
 * each) a block at a time as it goes, so that they arrive while these are multiplied. */
static inline void tile_scores(const float *q, int64_t g_n, int64_t d, const uint8_t **rows,
                               int64_t off, int64_t n, int type, float scale,
                               const uint8_t *const *next, int64_t n_next, int64_t row_bytes,
                               float *scores) {
  const int64_t block = 16 / g_n;
  tile_scores_begin(rows, n, block, next, n_next, off, row_bytes);
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    tile_block_request(next, j0, block, n_next, off, row_bytes);
    if (d == 32 || d == 64 || d == 128) {
      scores_rows(q, g_n, d, rows + j0, off, n - j0, type, scale, scores + j0);
      continue;
    }
    for (int64_t j = j0; j < j0 + block && j < n; j++) {
      for (int64_t g = 0; g < g_n; g++) {
        __m512 acc = _mm512_setzero_ps();
        for (int64_t c = 0; c < d; c += 16)
          acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * d + c), load16(rows[j] + off, c, type), acc);
        scores[g * NK_ATTN_TILE + j] = _mm512_reduce_add_ps(acc) * scale;
      }
    }
  }
}

/* Turns head g's scores into exp(s - running max), rescaling what came before. Returns
 * the factor the earlier accumulation must be multiplied by. */
static inline float tile_softmax(float *s, int64_t n, float *run_max, float *run_sum) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? 0xFFFF : (__mmask16)((1u << (n - j)) - 1);
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, s + j));
  }
  const float tile_max = _mm512_reduce_max_ps(m);
  const float new_max = tile_max > *run_max ? tile_max : *run_max;
  const float corr = *run_max == -INFINITY ? 0.0f : nk_expf(*run_max - new_max);
  __m512 sum = _mm512_setzero_ps();
  const __m512 mx = _mm512_set1_ps(new_max);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? 0xFFFF : (__mmask16)((1u << (n - j)) - 1);
    const __m512 e = nk_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mx));
    _mm512_mask_storeu_ps(s + j, k, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  *run_sum = *run_sum * corr + _mm512_reduce_add_ps(sum);
  *run_max = new_max;
  return corr;
}

/* acc[g][0, d) += sum_j p[g][j] * v_j (at rows[j] + off) for heads [g0, g0 + gn),
 * gn <= HEADS_PER_PASS; the first pass over the rows requests the rows next[0, n_next) + off
 * (row_bytes each), one per row. */
static inline __attribute__((always_inline)) void tile_values(float *acc, const float *p,
                                                              const uint8_t *const *rows,
                                                              int64_t off, int64_t n,
                                                              int64_t d, int type, int64_t g0,
                                                              const int gn,
                                                              const uint8_t *const *next,
                                                              int64_t n_next, int64_t row_bytes) {
  for (int64_t j = n; j < n_next; j++) prefetch_row_l2(next[j] + off, row_bytes);
  for (int64_t c = 0; c < d; c += 64) {
    const int w = d - c >= 64 ? 4 : (int)((d - c) / 16);
    __m512 o[HEADS_PER_PASS][4];
#pragma GCC unroll 4
    for (int g = 0; g < gn; g++) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        o[g][i] = i < w ? _mm512_loadu_ps(acc + (g0 + g) * d + c + 16 * i) : _mm512_setzero_ps();
      }
    }
    for (int64_t j = 0; j < n; j++) {
      if (c == 0 && j < n_next) prefetch_row_l2(next[j] + off, row_bytes);
      __m512 v[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) v[i] = i < w ? load16(rows[j] + off, c + 16 * i, type) : _mm512_setzero_ps();
#pragma GCC unroll 4
      for (int g = 0; g < gn; g++) {
        const __m512 pj = _mm512_set1_ps(p[(g0 + g) * NK_ATTN_TILE + j]);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) o[g][i] = _mm512_fmadd_ps(pj, v[i], o[g][i]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < gn; g++) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        if (i < w) _mm512_storeu_ps(acc + (g0 + g) * d + c + 16 * i, o[g][i]);
      }
    }
  }
}

/* The online softmax step of query rows [0, n_rows) (row r: a head of token t0 + r / g_n)
 * over the tile of n positions from p0: their scores become weights, 0 where a row does not
 * see the position (past its token, before its window), so that one pass over the V rows
 * serves all rows; the sums so far are rescaled to the new running maximum. */
static inline void tile_weights(const nk_attn *a, int64_t t0, int64_t g_n, int64_t n_rows,
                                int64_t p0, int64_t n, float *scores, float *acc,
                                float *run_max, float *run_sum) {
  const int64_t d = a->head_dim;
  for (int64_t r = 0; r < n_rows; r++) {
    int64_t lo, hi;
    nk_attn_tile_span(a, t0 + r / g_n, p0, n, &lo, &hi);
    float *s = scores + r * NK_ATTN_TILE;
    if (hi > lo) {
      const float corr = tile_softmax(s + lo, hi - lo, run_max + r, run_sum + r);
      if (corr != 1.0f) {
        for (int64_t i = 0; i < d; i++) acc[r * d + i] *= corr;
      }
    }
    for (int64_t j = 0; j < lo; j++) s[j] = 0.0f;
    for (int64_t j = hi; j < n; j++) s[j] = 0.0f;
  }
}

/* How far into the tile of n positions from p0 any of rows [g0, g0 + gn) sees. */
static inline int64_t tile_seen_end(const nk_attn *a, int64_t t0, int64_t g_n, int64_t g0,
                                    int64_t gn, int64_t p0, int64_t n) {
  int64_t m = 0;
  for (int64_t r = g0; r < g0 + gn; r++) {
    int64_t lo, hi;
    nk_attn_tile_span(a, t0 + r / g_n, p0, n, &lo, &hi);
    m = hi > m ? hi : m;
  }
  return m;
}

/* acc[r] += the weights of row r times the tile's V rows (at vrows[j] + off, of kv type
 * `type`), for rows [0, n_rows), HEADS_PER_PASS at a time, each group stopping at the last
 * position one of its rows sees. The first pass requests next[0, n_next) + off (row_bytes
 * each). */
static inline void tile_weighted_sum(const nk_attn *a, int64_t t0, int64_t g_n, int64_t n_rows,
                                     int64_t p0, int64_t n, const float *scores,
                                     const uint8_t *const *vrows, int64_t off, int type,
                                     float *acc, const uint8_t *const *next, int64_t n_next,
                                     int64_t row_bytes) {
  const int64_t d = a->head_dim;
  for (int64_t g0 = 0; g0 < n_rows; g0 += HEADS_PER_PASS) {
    const int64_t gn = rows_in_pass(n_rows, g0);
    const int64_t ask = g0 == 0 ? n_next : 0;
    const int64_t m = tile_seen_end(a, t0, g_n, g0, gn, p0, n);
    switch (gn) {
      case 1: tile_values(acc, scores, vrows, off, m, d, type, g0, 1, next, ask, row_bytes); break;
      case 2: tile_values(acc, scores, vrows, off, m, d, type, g0, 2, next, ask, row_bytes); break;
      case 3: tile_values(acc, scores, vrows, off, m, d, type, g0, 3, next, ask, row_bytes); break;
      default: tile_values(acc, scores, vrows, off, m, d, type, g0, 4, next, ask, row_bytes); break;
    }
  }
}

#endif
