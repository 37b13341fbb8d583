/*
 * AVX-512 attention for one kv head and a run of tokens: the algorithm of isa_attention.c
 * (online softmax over tiles of positions, f32 throughout) with each K and V row converted
 * once for all the query rows that share it (a prefill run's K tile transposed, so that its
 * scores are a register-blocked product), the exponentials sixteen at a time, and every row
 * of a tile requested from memory as soon as its address is known. A decode step finds
 * the cache cold (the weights streamed since the previous step have evicted it), so
 * waiting on the rows one at a time would cost a memory latency per position.
 */
#include "kern_avx512_attention_tiles.h"

/* Query rows whose scores stay in registers (4 accumulators each) through a K tile. */
#define ROWS_PER_BLOCK 6

/* kt[i][j] = k_j[i] for the tile's positions, 0 past its n up to a multiple of sixteen
 * (the sixteens past that are left as they are: nothing reads them): with K transposed one
 * FMA takes a query value against sixteen positions, so the scores need no horizontal sums.
 * A 16 x 16 block goes through registers in four rounds of shuffles. */
static void tile_transpose(const uint8_t *const *rows, int64_t n, int64_t d, int type,
                           float *kt) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
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

/* Scores of rn <= ROWS_PER_BLOCK rows against the first nv sixteens of the transposed tile:
 * rn x nv accumulators that each K load and query broadcast feed several FMAs. */
static inline __attribute__((always_inline)) void block_scores(const float *q, int64_t d,
                                                               const float *kt, const int rn,
                                                               const int nv, float scale,
                                                               float *s) {
  __m512 acc[ROWS_PER_BLOCK][4];
#pragma GCC unroll 6
  for (int r = 0; r < rn; r++) {
#pragma GCC unroll 4
    for (int i = 0; i < nv; i++) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < d; c++) {
    __m512 k[4];
#pragma GCC unroll 4
    for (int i = 0; i < nv; i++) k[i] = _mm512_loadu_ps(kt + c * NK_ATTN_TILE + 16 * i);
#pragma GCC unroll 6
    for (int r = 0; r < rn; r++) {
      const __m512 qb = _mm512_set1_ps(q[r * d + c]);
#pragma GCC unroll 4
      for (int i = 0; i < nv; i++) acc[r][i] = _mm512_fmadd_ps(qb, k[i], acc[r][i]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 6
  for (int r = 0; r < rn; r++) {
#pragma GCC unroll 4
    for (int i = 0; i < nv; i++) {
      _mm512_storeu_ps(s + r * NK_ATTN_TILE + 16 * i, _mm512_mul_ps(acc[r][i], sc));
    }
  }
}

static inline __attribute__((always_inline)) void gemm_scores_nv(const float *q, int64_t n_rows,
                                                                 int64_t d, const float *kt,
                                                                 const int nv, float scale,
                                                                 float *scores) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += ROWS_PER_BLOCK) {
    const float *qr = q + r0 * d;
    float *s = scores + r0 * NK_ATTN_TILE;
    switch (n_rows - r0 < ROWS_PER_BLOCK ? n_rows - r0 : ROWS_PER_BLOCK) {
      case 1: block_scores(qr, d, kt, 1, nv, scale, s); break;
      case 2: block_scores(qr, d, kt, 2, nv, scale, s); break;
      case 3: block_scores(qr, d, kt, 3, nv, scale, s); break;
      case 4: block_scores(qr, d, kt, 4, nv, scale, s); break;
      case 5: block_scores(qr, d, kt, 5, nv, scale, s); break;
      default: block_scores(qr, d, kt, 6, nv, scale, s); break;
    }
  }
}

/* Scores of the tile's n positions (the sixteens they take): a short tile, the last of a
 * prompt or a verification near the start of its sequence, skips the rest. */
static void gemm_scores(const float *q, int64_t n_rows, int64_t d, const float *kt, int64_t n,
                        float scale, float *scores) {
  switch ((n + 15) / 16) {
    case 1: gemm_scores_nv(q, n_rows, d, kt, 1, scale, scores); break;
    case 2: gemm_scores_nv(q, n_rows, d, kt, 2, scale, scores); break;
    case 3: gemm_scores_nv(q, n_rows, d, kt, 3, scale, scores); break;
    default: gemm_scores_nv(q, n_rows, d, kt, 4, scale, scores); break;
  }
}

/* rows[0, n) of kv type `type` as f32 in buf, rows then pointing there. */
static void tile_f32(const uint8_t **rows, int64_t n, int64_t d, int32_t type, float *buf) {
  for (int64_t j = 0; j < n; j++) {
    for (int64_t i = 0; i < d; i += 16) _mm512_storeu_ps(buf + j * d + i, load16(rows[j], i, type));
    rows[j] = (const uint8_t *)(buf + j * d);
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
  const uint8_t *krows[NK_ATTN_TILE + 16], *vrows[NK_ATTN_TILE];
  int64_t start, len;
  nk_attn_seen(a, t0, nt, &start, &len);
  /* Row r is head r % g_n of token t0 + r / g_n: the group's heads are adjacent in q. */
  for (int64_t i = 0; i < nt; i++) {
    memcpy(q + i * g_n * d, a->q + ((t0 + i) * a->n_heads + kvh * g_n) * d,
           (size_t)(g_n * d) * 4);
  }
  for (int64_t i = 0; i < n_rows * d; i++) acc[i] = 0.0f;
  for (int64_t r = 0; r < n_rows; r++) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
  }
  /* Past a decode group's rows, one transposition of a K tile (converting f16 once instead
   * of per FMA) costs less than the horizontal sums it saves. */
  const int gemm = n_rows > HEADS_PER_PASS;
  /* A decode group's few rows spend their time waiting on cache rows, which the weights
   * streamed since the previous step have evicted. So each of its passes requests, as it
   * goes, the rows the next pass reads: V during the scores, the next tile's K during the
   * values. A prefill run computes long enough on a tile to request it whole. */
  if (start < len) {
    tile_rows(a, a->k_cache, start, len - start < NK_ATTN_TILE ? len - start : NK_ATTN_TILE,
              kvh, row_bytes, 1, krows);
  }
  for (int64_t p0 = start; p0 < len; p0 += NK_ATTN_TILE) {
    const int64_t n = len - p0 < NK_ATTN_TILE ? len - p0 : NK_ATTN_TILE;
    const int64_t p1 = p0 + n, n1 = len - p1 < NK_ATTN_TILE ? len - p1 : NK_ATTN_TILE;
    tile_rows(a, a->v_cache, p0, n, kvh, row_bytes, gemm, vrows);
    if (gemm) {
      tile_transpose(krows, n, d, a->kv_type, kbuf);
      gemm_scores(q, n_rows, d, kbuf, n, a->scale, scores);
    } else {
      tile_scores(q, n_rows, d, krows, 0, n, a->kv_type, a->scale, vrows, n, row_bytes, scores);
    }
    if (n1 > 0) tile_rows(a, a->k_cache, p1, n1, kvh, row_bytes, gemm, krows);
    tile_weights(a, t0, g_n, n_rows, p0, n, scores, acc, run_max, run_sum);
    /* For many rows the transposed K is spent: its buffer takes V as f32, converted once
     * for all of them; a decode group's few rows read V in place. */
    if (gemm && a->kv_type != NK_F32) tile_f32(vrows, n, d, a->kv_type, kbuf);
    tile_weighted_sum(a, t0, g_n, n_rows, p0, n, scores, vrows, 0, gemm ? NK_F32 : a->kv_type,
                      acc, krows, gemm || n1 < 0 ? 0 : n1, row_bytes);
  }
  for (int64_t r = 0; r < n_rows; r++) {
    float *out = a->out + ((t0 + r / g_n) * a->n_heads + kvh * g_n + r % g_n) * d;
    const float inv = 1.0f / run_sum[r];
    for (int64_t i = 0; i < d; i++) out[i] = acc[r * d + i] * inv;
  }
  return 1;
}
