/*
 * AVX-512 attention for one kv head and a run of tokens: the algorithm of isa_attention.c
 * (online softmax over tiles of positions, f32 throughout) with each K and V row converted
 * once for all the query rows that share it (a prefill run's K tile transposed, so that its
 * scores are a register-blocked product), the exponentials sixteen at a time, and every row
 * of a tile requested from memory as soon as its address is known. A decode step finds
 * the cache cold (the weights streamed since the previous step have evicted it), so
 * waiting on the rows one at a time would cost a memory latency per position.
 */
#include <math.h>

#include "isa_common.h"
#include "isa_exp.h"
#include "kern_avx512.h"

#define MAX_DIM 256
/* Query heads whose outputs stay in registers while a V row is added to them. */
#define HEADS_PER_PASS 4
/* Query rows whose scores stay in registers (4 accumulators each) through a K tile. */
#define ROWS_PER_BLOCK 6

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
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(b->d)));
  }
  if (type == NK_Q4_0) {
    const nk_block_q4_0 *b = (const nk_block_q4_0 *)row + (i >> 5);
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    /* Values 0-15 are the low nibbles, 16-31 the high ones, both biased by 8. */
    const __m512i q = (i & 16) ? _mm512_srli_epi32(bytes, 4)
                               : _mm512_and_si512(bytes, _mm512_set1_epi32(0xF));
    const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(8)));
    return _mm512_mul_ps(v, _mm512_set1_ps(_cvtsh_ss(b->d)));
  }
  return _mm512_loadu_ps((const float *)row + i);
}

/* The rows of positions [p0, p0 + n) of kv head kvh, each prefetched. */
static void tile_rows(const nk_attn *a, const void *cache, int64_t p0, int64_t n, int64_t kvh,
                      int64_t row_bytes, const void **rows) {
  int64_t logical = p0 / a->block_size, slot = p0 % a->block_size;
  for (int64_t j = 0; j < n; j++) {
    const int64_t at = (a->block_table[logical] * a->block_size + slot) * a->n_kv_heads + kvh;
    rows[j] = (const uint8_t *)cache + at * row_bytes;
    for (int64_t o = 0; o < row_bytes; o += 64) __builtin_prefetch((const uint8_t *)rows[j] + o);
    if (++slot == a->block_size) {
      slot = 0;
      logical++;
    }
  }
}

/* scores[g][j] = scale * q_g . k_j for sixteen rows (a tail repeats a real row) and nd
 * sixteen-value chunks per row. */
static inline __attribute__((always_inline)) void scores16(const float *q, int64_t g_n,
                                                           const void *const *rows, const int nd,
                                                           int type, float scale, float *out) {
  for (int64_t g = 0; g < g_n; g++) {
    __m512 qv[MAX_DIM / 16], p[16];
#pragma GCC unroll 16
    for (int c = 0; c < nd; c++) qv[c] = _mm512_loadu_ps(q + g * nd * 16 + 16 * c);
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) {
      p[j] = _mm512_mul_ps(qv[0], load16(rows[j], 0, type));
#pragma GCC unroll 16
      for (int c = 1; c < nd; c++) p[j] = _mm512_fmadd_ps(qv[c], load16(rows[j], 16 * c, type), p[j]);
    }
    _mm512_storeu_ps(out + g * NK_ATTN_TILE, _mm512_mul_ps(nk_sum16_ps(p), _mm512_set1_ps(scale)));
  }
}

/* scores[g][j] = scale * q_g . k_j for the tile's rows. */
static void tile_scores(const float *q, int64_t g_n, int64_t d, const void **rows, int64_t n,
                        int type, float scale, float *scores) {
  for (int64_t j = n; j < nk_round_up(n, 16); j++) rows[j] = rows[0];
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    switch (d / 16) {
      case 2: scores16(q, g_n, rows + j0, 2, type, scale, scores + j0); break;
      case 4: scores16(q, g_n, rows + j0, 4, type, scale, scores + j0); break;
      case 8: scores16(q, g_n, rows + j0, 8, type, scale, scores + j0); break;
      default: {
        for (int64_t j = j0; j < j0 + 16; j++) {
          for (int64_t g = 0; g < g_n; g++) {
            __m512 acc = _mm512_setzero_ps();
            for (int64_t c = 0; c < d; c += 16)
              acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * d + c), load16(rows[j], c, type), acc);
            scores[g * NK_ATTN_TILE + j] = _mm512_reduce_add_ps(acc) * scale;
          }
        }
      }
    }
  }
}

/* kt[i][j] = k_j[i] for the tile's positions, 0 past its n: with K transposed one FMA takes
 * a query value against sixteen positions, so the scores need no horizontal sums. A 16 x 16
 * block goes through registers in four rounds of shuffles. */
static void tile_transpose(const void *const *rows, int64_t n, int64_t d, int type, float *kt) {
  for (int64_t j0 = 0; j0 < NK_ATTN_TILE; j0 += 16) {
    for (int64_t c = 0; c < d; c += 16) {
      __m512 r[16], t[16], u[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; j++) {
        r[j] = j0 + j < n ? load16(rows[j0 + j], c, type) : _mm512_setzero_ps();
      }
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
      }
      /* u[4i + k], 128-bit lane l: value 4l + k of rows 4i .. 4i + 3. */
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
        const __m512d e = _mm512_castps_pd(t[4 * i + 1]), f = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(e, f));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(e, f));
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const __m512 lo0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x44);
        const __m512 hi0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xEE);
        const __m512 lo1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x44);
        const __m512 hi1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xEE);
        float *o = kt + (c + k) * NK_ATTN_TILE + j0;
        _mm512_storeu_ps(o, _mm512_shuffle_f32x4(lo0, lo1, 0x88));
        _mm512_storeu_ps(o + 4 * NK_ATTN_TILE, _mm512_shuffle_f32x4(lo0, lo1, 0xDD));
        _mm512_storeu_ps(o + 8 * NK_ATTN_TILE, _mm512_shuffle_f32x4(hi0, hi1, 0x88));
        _mm512_storeu_ps(o + 12 * NK_ATTN_TILE, _mm512_shuffle_f32x4(hi0, hi1, 0xDD));
      }
    }
  }
}

/* Scores of rn <= ROWS_PER_BLOCK rows against the transposed tile: rn x 64 accumulators
 * that each K load and query broadcast feed several FMAs. */
static inline __attribute__((always_inline)) void block_scores(const float *q, int64_t d,
                                                               const float *kt, const int rn,
                                                               float scale, float *s) {
  __m512 acc[ROWS_PER_BLOCK][4];
#pragma GCC unroll 6
  for (int r = 0; r < rn; r++) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < d; c++) {
    __m512 k[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) k[i] = _mm512_loadu_ps(kt + c * NK_ATTN_TILE + 16 * i);
#pragma GCC unroll 6
    for (int r = 0; r < rn; r++) {
      const __m512 qb = _mm512_set1_ps(q[r * d + c]);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) acc[r][i] = _mm512_fmadd_ps(qb, k[i], acc[r][i]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 6
  for (int r = 0; r < rn; r++) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      _mm512_storeu_ps(s + r * NK_ATTN_TILE + 16 * i, _mm512_mul_ps(acc[r][i], sc));
    }
  }
}

static void gemm_scores(const float *q, int64_t n_rows, int64_t d, const float *kt, float scale,
                        float *scores) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += ROWS_PER_BLOCK) {
    const float *qr = q + r0 * d;
    float *s = scores + r0 * NK_ATTN_TILE;
    switch (n_rows - r0 < ROWS_PER_BLOCK ? n_rows - r0 : ROWS_PER_BLOCK) {
      case 1: block_scores(qr, d, kt, 1, scale, s); break;
      case 2: block_scores(qr, d, kt, 2, scale, s); break;
      case 3: block_scores(qr, d, kt, 3, scale, s); break;
      case 4: block_scores(qr, d, kt, 4, scale, s); break;
      case 5: block_scores(qr, d, kt, 5, scale, s); break;
      default: block_scores(qr, d, kt, 6, scale, s); break;
    }
  }
}

/* Turns head g's scores into exp(s - running max), rescaling what came before. Returns
 * the factor the earlier accumulation must be multiplied by. */
static float tile_softmax(float *s, int64_t n, float *run_max, float *run_sum) {
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

/* acc[g][0, d) += sum_j p[g][j] * v_j for heads [g0, g0 + gn), gn <= HEADS_PER_PASS. */
static inline __attribute__((always_inline)) void tile_values(float *acc, const float *p,
                                                              const void *const *rows, int64_t n,
                                                              int64_t d, int type, int64_t g0,
                                                              const int gn) {
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
      __m512 v[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) v[i] = i < w ? load16(rows[j], c + 16 * i, type) : _mm512_setzero_ps();
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

/* rows[0, n) of kv type `type` as f32 in buf, rows then pointing there. */
static void tile_f32(const void **rows, int64_t n, int64_t d, int32_t type, float *buf) {
  for (int64_t j = 0; j < n; j++) {
    for (int64_t i = 0; i < d; i += 16) _mm512_storeu_ps(buf + j * d + i, load16(rows[j], i, type));
    rows[j] = buf + j * d;
  }
}

int nk_attend_avx512(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh, float *scratch) {
  const int64_t d = a->head_dim;
  const int64_t g_n = a->n_heads / a->n_kv_heads, n_rows = nt * g_n;
  if (d % 16 != 0 || d > MAX_DIM) return 0;
  const int64_t row_bytes = nk_kv_head_bytes(a->kv_type, d);
  float *acc = scratch;
  float *scores = acc + n_rows * d;
  float *run_max = scores + n_rows * NK_ATTN_TILE;
  float *run_sum = run_max + n_rows;
  float *q = run_sum + n_rows;
  float *kbuf = q + n_rows * d;
  const void *krows[NK_ATTN_TILE + 16], *vrows[NK_ATTN_TILE];
  int64_t len = 0, start = INT64_MAX;
  /* Row r is head r % g_n of token t0 + r / g_n: the group's heads are adjacent in q. */
  for (int64_t i = 0; i < nt; i++) {
    memcpy(q + i * g_n * d, a->q + ((t0 + i) * a->n_heads + kvh * g_n) * d,
           (size_t)(g_n * d) * 4);
    if (a->positions[t0 + i] + 1 > len) len = (int64_t)a->positions[t0 + i] + 1;
    if (nk_attn_first(a, t0 + i) < start) start = nk_attn_first(a, t0 + i);
  }
  for (int64_t i = 0; i < n_rows * d; i++) acc[i] = 0.0f;
  for (int64_t r = 0; r < n_rows; r++) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
  }
  for (int64_t p0 = start; p0 < len; p0 += NK_ATTN_TILE) {
    const int64_t n = len - p0 < NK_ATTN_TILE ? len - p0 : NK_ATTN_TILE;
    tile_rows(a, a->k_cache, p0, n, kvh, row_bytes, krows);
    tile_rows(a, a->v_cache, p0, n, kvh, row_bytes, vrows);
    /* Past a decode group's rows, one transposition of the tile (converting f16 once
     * instead of per FMA) costs less than the horizontal sums it saves. */
    const int gemm = n_rows > HEADS_PER_PASS;
    if (gemm) {
      tile_transpose(krows, n, d, a->kv_type, kbuf);
      gemm_scores(q, n_rows, d, kbuf, a->scale, scores);
    } else {
      tile_scores(q, n_rows, d, krows, n, a->kv_type, a->scale, scores);
    }
    /* Positions a row does not see (past its token, before its window) weigh 0, so one
     * pass over the V rows serves all rows. */
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
    /* For many rows the transposed K is spent: its buffer takes V as f32, converted once
     * for all of them; a decode group's few rows read V in place. */
    const int vtype = gemm ? NK_F32 : a->kv_type;
    if (gemm && a->kv_type != NK_F32) tile_f32(vrows, n, d, a->kv_type, kbuf);
    for (int64_t g0 = 0; g0 < n_rows; g0 += HEADS_PER_PASS) {
      const int64_t gn = n_rows - g0 < HEADS_PER_PASS ? n_rows - g0 : HEADS_PER_PASS;
      int64_t m = 0;
      for (int64_t r = g0; r < g0 + gn; r++) {
        int64_t lo, hi;
        nk_attn_tile_span(a, t0 + r / g_n, p0, n, &lo, &hi);
        m = hi > m ? hi : m;
      }
      switch (gn) {
        case 1: tile_values(acc, scores, vrows, m, d, vtype, g0, 1); break;
        case 2: tile_values(acc, scores, vrows, m, d, vtype, g0, 2); break;
        case 3: tile_values(acc, scores, vrows, m, d, vtype, g0, 3); break;
        default: tile_values(acc, scores, vrows, m, d, vtype, g0, 4); break;
      }
    }
  }
  for (int64_t r = 0; r < n_rows; r++) {
    float *out = a->out + ((t0 + r / g_n) * a->n_heads + kvh * g_n + r % g_n) * d;
    const float inv = 1.0f / run_sum[r];
    for (int64_t i = 0; i < d; i++) out[i] = acc[r * d + i] * inv;
  }
  return 1;
}
