/*
 * A decode span's steps against a q8_0 or q4_0 cache (kern_avx512_attention_split.c).
 * Converting every K and V value to f32 with its block's scale takes five instructions per
 * sixteen values where f16 takes one, and made the halved bytes cost more time than f16's.
 * Here:
 * - The score is taken as llama.cpp takes it, a q8_0 . q8_0 (or q4_0 . q8_0) dot product:
 *   the query, rounded through q8_0 (attention.c), is int8 values with a scale per block,
 *   multiplied with the stored values by VPDPBUSD. q8_0's bytes are offset by 128 to make
 *   them unsigned, and each sum starts at -128 times its query values, which cancels the
 *   offset; q4_0's nibbles are unsigned already, stored 8 above their values, and each sum
 *   starts at -8 times its query values. Floats come in once per two blocks.
 * - V's block scales are folded into each position's weights, sixteen positions at a time,
 *   so a V value costs one conversion to f32 whatever the number of query rows.
 * Measured and not kept: V in integers (weights rounded to int16 per tile, two positions'
 * int8 values interleaved for VPDPWSSD, int32 sums turned to floats once a tile) halved the
 * V pass's instructions but not its time, in cache or from memory (2 threads, 28 layers,
 * 2048 and 8192 positions, libraries alternated).
 */
#ifndef KERN_AVX512_ATTENTION_QUANT_H
#define KERN_AVX512_ATTENTION_QUANT_H

#include "kern_avx512_attention_tiles.h"

/* 64 values (two blocks) of a query row as q8_0, laid out for VPDPBUSD's sums: lane l sums
 * values 4l..4l+3, so lanes 0-7 hold the first block's and 8-15 the second's. A row's d / 64
 * chunks take the d floats nk_attn_split_head_floats keeps for them. */
typedef struct {
  int8_t q[64];
  /* Each lane's block scale. */
  float d[16];
  /* Each lane's starting value: -128 times the sum of its four query values, against
   * q8_0's offset bytes; -8 times it, against q4_0's nibbles. */
  int32_t bias[16], bias4[16];
} q8_chunk;

/* Query row q (d values, already rounded through q8_0) as d / 64 chunks. The rounded values
 * are exact multiples of their block's scale, 127 times which is the block's largest
 * magnitude, so the int8 values come back exactly. */
static inline void q8_query_put(const float *q, int64_t d, q8_chunk *out) {
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < d / 32; b++) {
    const __m512 x0 = _mm512_loadu_ps(q + 32 * b), x1 = _mm512_loadu_ps(q + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    q8_chunk *c = out + b / 2;
    const int half = (int)(b % 2);
    /* Rounded to nearest even, as nearbyintf in the default mode. */
    const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, inv)));
    const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, inv)));
    const __m256i qb = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    _mm256_storeu_si256((__m256i *)(c->q + 32 * half), qb);
    /* Each lane's four values summed as VPDPBUSD will sum them, times -128. */
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, qb);
    _mm256_storeu_si256((__m256i *)(c->bias + 8 * half),
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 7)));
    _mm256_storeu_si256((__m256i *)(c->bias4 + 8 * half),
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 3)));
    _mm256_storeu_ps(c->d + 8 * half, _mm256_set1_ps(amax / 127.0f));
  }
}

/* The f16 scale of block b of the quantized row at `row`. */
static inline uint16_t block_d(const uint8_t *row, int64_t b, const int q4) {
  return q4 ? ((const nk_block_q4_0 *)row)[b].d : ((const nk_block_q8_0 *)row)[b].d;
}

/* Two blocks' f16 scales, each in the eight lanes of its block's values. */
static inline __m512 chunk_scales(uint16_t d0, uint16_t d1) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)d0)),
                                                 _mm_set1_epi16((short)d1), 1));
}

/* Two blocks of key values at `at`, unsigned, in the order of a q8_chunk's values, and
 * their scales in its lanes' order: q8_0's bytes offset by 128, or q4_0's nibbles (the low
 * ones values 0-15, the high ones 16-31). */
static inline __attribute__((always_inline)) __m512i key_chunk(const uint8_t *at, const int q4,
                                                               __m512 *scales) {
  if (q4) {
    const nk_block_q4_0 *b = (const nk_block_q4_0 *)at;
    const __m512i both = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b[0].qs))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b[1].qs)), 1);
    /* Each block's bytes twice: the first copy keeps its low nibbles, the second its high. */
    const __m512i shifted = _mm512_mask_srli_epi16(both, (__mmask32)0xFF00FF00u, both, 4);
    *scales = chunk_scales(b[0].d, b[1].d);
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
  }
  const nk_block_q8_0 *b = (const nk_block_q8_0 *)at;
  const __m512i k = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)),
      _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
  *scales = chunk_scales(b[0].d, b[1].d);
  return _mm512_xor_si512(k, _mm512_set1_epi8((char)0x80));
}

/* One block of q8_scores for G <= 4 query rows and the 16 / G key rows at rows[j] + off (a
 * tail repeats a real row; only the first n are stored), nc chunks per row, as
 * scores_block; q4 says the keys are q4_0. */
static inline __attribute__((always_inline)) void q8_scores_block(const q8_chunk *qc,
                                                                  const int G,
                                                                  const uint8_t *const *rows,
                                                                  int64_t off, int64_t n,
                                                                  const int nc, const int q4,
                                                                  float scale, float *out) {
  const int R = 16 / G;
  const int64_t block_bytes = q4 ? (int64_t)sizeof(nk_block_q4_0) : (int64_t)sizeof(nk_block_q8_0);
  __m512 p[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) p[i] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int c = 0; c < nc; c++) {
#pragma GCC unroll 16
    for (int j = 0; j < R; j++) {
      __m512 dk;
      const __m512i ku = key_chunk(rows[j] + off + 2 * c * block_bytes, q4, &dk);
#pragma GCC unroll 4
      for (int g = 0; g < G; g++) {
        const q8_chunk *qg = qc + g * nc + c;
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_loadu_si512(q4 ? qg->bias4 : qg->bias), ku,
                                                _mm512_loadu_si512(qg->q));
        p[g * R + j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                       _mm512_mul_ps(dk, _mm512_loadu_ps(qg->d)), p[g * R + j]);
      }
    }
  }
  block_scores_put(p, G, n, scale, out);
}

/* q8_scores_block for g_n rows and nc chunks, as constants. */
static inline __attribute__((always_inline)) void q8_scores_rows(const q8_chunk *qc, int64_t g_n,
                                                                 int64_t nc,
                                                                 const uint8_t *const *rows,
                                                                 int64_t off, int64_t n,
                                                                 const int q4, float scale,
                                                                 float *out) {
#define Q8_SCORES_NC(G)                                                     \
  switch (nc) {                                                             \
    case 1: q8_scores_block(qc, G, rows, off, n, 1, q4, scale, out); break; \
    case 2: q8_scores_block(qc, G, rows, off, n, 2, q4, scale, out); break; \
    case 3: q8_scores_block(qc, G, rows, off, n, 3, q4, scale, out); break; \
    default: q8_scores_block(qc, G, rows, off, n, 4, q4, scale, out); break; \
  }
  switch (g_n) {
    case 1: Q8_SCORES_NC(1) break;
    case 2: Q8_SCORES_NC(2) break;
    case 3: Q8_SCORES_NC(3) break;
    default: Q8_SCORES_NC(4) break;
  }
#undef Q8_SCORES_NC
}

/* tile_scores for a q8_0 or (q4) q4_0 cache: the g_n query rows as chunks (qc, d / 64 per
 * row). */
static inline void q8_tile_scores(const q8_chunk *qc, int64_t g_n, int64_t d, const uint8_t **rows,
                                  int64_t off, int64_t n, int q4, float scale,
                                  const uint8_t *const *next, int64_t n_next, int64_t row_bytes,
                                  float *scores) {
  const int64_t block = 16 / g_n;
  tile_scores_begin(rows, n, block, next, n_next, off, row_bytes);
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    tile_block_request(next, j0, block, n_next, off, row_bytes);
    /* q4 as a constant in each branch: one copy of the steps per cache type. */
    if (q4) {
      q8_scores_rows(qc, g_n, d / 64, rows + j0, off, n - j0, 1, scale, scores + j0);
    } else {
      q8_scores_rows(qc, g_n, d / 64, rows + j0, off, n - j0, 0, scale, scores + j0);
    }
  }
}

/* The 64 values of blocks b0 and b0 + 1 of the V row at `row` (q8_0, or q4 for q4_0) as
 * f32, without their scales. */
static inline __attribute__((always_inline)) void value_chunk(const uint8_t *row, int64_t b0,
                                                              const int q4, __m512 v[4]) {
  if (q4) {
    const nk_block_q4_0 *blk = (const nk_block_q4_0 *)row + b0;
    const __m512i eight = _mm512_set1_epi32(8);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)blk[i].qs));
      const __m512i lo = _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
      v[2 * i] = _mm512_cvtepi32_ps(_mm512_sub_epi32(lo, eight));
      v[2 * i + 1] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(bytes, 4), eight));
    }
    return;
  }
  const nk_block_q8_0 *blk = (const nk_block_q8_0 *)row + b0;
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    v[i] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk[i / 2].qs + 16 * (i % 2)))));
  }
}

/* acc[g][0, d) += sum_j p[g][j] * v_j for rows g < gn, the n <= 16 V rows at
 * rows[j] + off in q8_0 or (q4) q4_0 (d a multiple of 64), each row's weight times its
 * block's scale taken first, as tile_values. */
static inline __attribute__((always_inline)) void q8_tile_values(float *acc, const float *p,
                                                                 const uint8_t *const *rows,
                                                                 int64_t off, int64_t n,
                                                                 int64_t d, const int gn,
                                                                 const int q4,
                                                                 const uint8_t *const *next,
                                                                 int64_t n_next,
                                                                 int64_t row_bytes) {
  const int64_t nb = d / 32;
  /* Block b's scale of every position, then each row's weights times them. */
  uint16_t dh[MAX_DIM / 32][16];
  float w[HEADS_PER_PASS][MAX_DIM / 32][16];
  for (int64_t b = 0; b < nb; b++) {
    for (int64_t j = 0; j < 16; j++) {
      dh[b][j] = j < n ? block_d(rows[j] + off, b, q4) : 0;
    }
  }
  const __mmask16 live = (__mmask16)((1u << n) - 1);
  for (int g = 0; g < gn; g++) {
    const __m512 pg = _mm512_maskz_loadu_ps(live, p + g * NK_ATTN_TILE);
    for (int64_t b = 0; b < nb; b++) {
      const __m512 db = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh[b]));
      _mm512_storeu_ps(w[g][b], _mm512_mul_ps(pg, db));
    }
  }
  for (int64_t j = n; j < n_next; j++) prefetch_row_l2(next[j] + off, row_bytes);
  for (int64_t c = 0; c < d; c += 64) {
    const int64_t b0 = c / 32;
    __m512 o[HEADS_PER_PASS][4];
#pragma GCC unroll 4
    for (int g = 0; g < gn; g++) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) o[g][i] = _mm512_loadu_ps(acc + g * d + c + 16 * i);
    }
    for (int64_t j = 0; j < n; j++) {
      if (c == 0 && j < n_next) prefetch_row_l2(next[j] + off, row_bytes);
      __m512 v[4];
      value_chunk(rows[j] + off, b0, q4, v);
#pragma GCC unroll 4
      for (int g = 0; g < gn; g++) {
        const __m512 w0 = _mm512_set1_ps(w[g][b0][j]);
        const __m512 w1 = _mm512_set1_ps(w[g][b0 + 1][j]);
        o[g][0] = _mm512_fmadd_ps(w0, v[0], o[g][0]);
        o[g][1] = _mm512_fmadd_ps(w0, v[1], o[g][1]);
        o[g][2] = _mm512_fmadd_ps(w1, v[2], o[g][2]);
        o[g][3] = _mm512_fmadd_ps(w1, v[3], o[g][3]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < gn; g++) {
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) _mm512_storeu_ps(acc + g * d + c + 16 * i, o[g][i]);
    }
  }
}

/* q8_tile_values for gn <= HEADS_PER_PASS rows and the cache type, as constants. */
static inline __attribute__((always_inline)) void q8_pass_values(float *acc, const float *p,
                                                                 const uint8_t *const *rows,
                                                                 int64_t off, int64_t n,
                                                                 int64_t d, int64_t gn,
                                                                 const int q4,
                                                                 const uint8_t *const *next,
                                                                 int64_t n_next,
                                                                 int64_t row_bytes) {
  switch (gn) {
    case 1: q8_tile_values(acc, p, rows, off, n, d, 1, q4, next, n_next, row_bytes); break;
    case 2: q8_tile_values(acc, p, rows, off, n, d, 2, q4, next, n_next, row_bytes); break;
    case 3: q8_tile_values(acc, p, rows, off, n, d, 3, q4, next, n_next, row_bytes); break;
    default: q8_tile_values(acc, p, rows, off, n, d, 4, q4, next, n_next, row_bytes); break;
  }
}

/* tile_weighted_sum for a q8_0 or (q4) q4_0 cache: a decode span's n <= 16 positions and
 * its n_rows rows, HEADS_PER_PASS at a time; the first pass requests next[0, n_next). */
static inline void q8_tile_weighted_sum(const nk_attn *a, int64_t g_n, int64_t n_rows, int64_t p0,
                                        int64_t n, const float *scores,
                                        const uint8_t *const *vrows, int64_t off, int q4,
                                        float *acc, const uint8_t *const *next, int64_t n_next,
                                        int64_t row_bytes) {
  const int64_t d = a->head_dim;
  for (int64_t g0 = 0; g0 < n_rows; g0 += HEADS_PER_PASS) {
    const int64_t gn = rows_in_pass(n_rows, g0);
    const int64_t m = tile_seen_end(a, 0, g_n, g0, gn, p0, n), ask = g0 == 0 ? n_next : 0;
    float *acc_g = acc + g0 * d;
    const float *p = scores + g0 * NK_ATTN_TILE;
    /* q4 as a constant in each branch: one copy of the steps per cache type. */
    if (q4) {
      q8_pass_values(acc_g, p, vrows, off, m, d, gn, 1, next, ask, row_bytes);
    } else {
      q8_pass_values(acc_g, p, vrows, off, m, d, gn, 0, next, ask, row_bytes);
    }
  }
}

#endif
