/*
 * AVX-512 products with repacked weights (repack.c): a vector holds sixteen rows, so a
 * 4-byte broadcast of a token's activations times one 64-byte load of weights is one
 * VPDPBUSD for sixteen rows, and the int32 sums are scaled into f32 once per token and
 * block (Q8_0), or super-block (Q4_K and Q6_K, their sub-block scales applied in integers;
 * Q4_K once per sub-block where the activations have a scale per 32). A tile is one group
 * of sixteen rows by as many tokens as the registers hold sums for; more tokens go in
 * tiles over the same group, which the first tile brought into cache. No row needs a
 * horizontal sum: a tile's sixteen results per token are one store. Tiles of several groups
 * (more independent sums for one token) were measured slower on the 2-core Zen 4 VM, Q4_K
 * at one token 1.6x: each group is its own stream through memory, and several at once left
 * the prefetches too little time ahead. From eight tokens on, Q4_K goes two groups a tile
 * all the same (q4_k_pair_int), where reusing each broadcast pays for the second stream.
 */
#include "kern_avx512_r16.h"

/* Q8_0: per block, d_w * (d_x * sum((q + 128) x) - 128 s_x), as q8_0_row. */
static inline __attribute__((always_inline)) void q8_0_tile(const nk_mm *mm, int64_t g,
                                                            int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nb = mm->cols / 32;
  const uint8_t *grp = mm->w + g * 16 * mm->row_bytes;
  /* Two sums per token when few: a block's eight multiply-adds are otherwise one chain. */
  const int ns = nt <= 4 ? 2 : 1;
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  const int prefetch = t0 == 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = grp + b * NK_R16_Q8_0_BLOCK;
    if (prefetch) nk_prefetch_ahead(mm, blk, NK_R16_Q8_0_BLOCK);
    __m512i ip[16][2];
#pragma GCC unroll 16
    for (int j = 0; j < nt; j++) ip[j][0] = ip[j][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      const __m512i w = _mm512_loadu_si512(blk + NK_R16_Q8_0_QS + 64 * k);
#pragma GCC unroll 16
      for (int j = 0; j < nt; j++) {
        const int s = ns == 2 ? k & 1 : 0;
        const int8_t *xq = mm->act.q + (t0 + j) * kp + 32 * b + 4 * k;
        ip[j][s] = dpb4(ip[j][s], w, xq);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
    const __m512 dw128 = _mm512_mul_ps(dw, _mm512_set1_ps(128.0f));
#pragma GCC unroll 16
    for (int j = 0; j < nt; j++) {
      const int64_t at = (t0 + j) * (kp / 32) + b;
      const __m512i sum = ns == 2 ? _mm512_add_epi32(ip[j][0], ip[j][1]) : ip[j][0];
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                               _mm512_mul_ps(dw, _mm512_set1_ps(mm->act.d32[at])), acc[j]);
      acc[j] = _mm512_fnmadd_ps(dw128, _mm512_set1_ps(mm->act.s32[at]), acc[j]);
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < nt; j++) store16(mm, g, t0 + j, acc[j]);
}

/* The sixteen rows' scales (or mins) of one sub-block, times d (or dmin). */
static inline __m512 k4_scales16(const uint8_t *p, __m512 d) {
  const __m128i bytes = _mm_loadu_si128((const __m128i *)p);
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)));
}

/* Run q of Q4_K super-block i (at blk): lo[j] and hi[j] get token t0 + j's int32 sums
 * over sub-blocks 2q (low nibbles) and 2q + 1 (high, as q4_high16 leaves them: 16 times
 * the sums). */
static inline __attribute__((always_inline)) void q4_k_run(const nk_mm *mm, const uint8_t *blk,
                                                           int64_t i, int q, int64_t t0,
                                                           const int nt, __m512i *lo,
                                                           __m512i *hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  /* A quarter of the super-block per run: bursts of prefetches stall the loads. */
  if (t0 == 0) nk_prefetch_ahead(mm, blk + NK_R16_Q4_K_BLOCK / 4 * q, NK_R16_Q4_K_BLOCK / 4);
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) lo[j] = hi[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = 0; k < 8; k++) {
    const __m512i v = q4_bytes(blk + NK_R16_Q4_K_QS + 512 * q + 64 * k, nt);
    const __m512i wl = _mm512_and_si512(v, low4), wh = q4_high16(v);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const int8_t *xq = mm->act.q + (t0 + j) * mm->kp + 256 * i + 64 * q + 4 * k;
      lo[j] = dpb4(lo[j], wl, xq);
      hi[j] = dpb4(hi[j], wh, xq + 32);
    }
  }
}

/* Q4_K against activations quantized per 32: per sub-block s,
 * d sc_s * d_x * sum(q x) - dmin m_s * s_x, as q4_k_row. */
static inline __attribute__((always_inline)) void q4_k_tile(const nk_mm *mm, int64_t g,
                                                            int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *grp = mm->w + g * 16 * mm->row_bytes;
  __m512 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = grp + i * NK_R16_Q4_K_BLOCK;
    const __m512 d = q4_d(blk), d16 = q4_over16(d);
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + NK_R16_Q4_K_DMIN)));
    for (int q = 0; q < 4; q++) {
      __m512i lo[8], hi[8];
      q4_k_run(mm, blk, i, q, t0, nt, lo, hi);
      const __m512 sc0 = k4_scales16(blk + NK_R16_Q4_K_SCALES + 32 * q, d),
                   sc1 = k4_scales16(blk + NK_R16_Q4_K_SCALES + 16 + 32 * q, d16);
      const __m512 m0 = k4_scales16(blk + NK_R16_Q4_K_MINS + 32 * q, dmin);
      const __m512 m1 = k4_scales16(blk + NK_R16_Q4_K_MINS + 16 + 32 * q, dmin);
#pragma GCC unroll 8
      for (int j = 0; j < nt; j++) {
        const int64_t at = (t0 + j) * (kp / 32) + 8 * i + 2 * q;
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[j]),
                                 _mm512_mul_ps(sc0, _mm512_set1_ps(mm->act.d32[at])), acc[j]);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[j]),
                                 _mm512_mul_ps(sc1, _mm512_set1_ps(mm->act.d32[at + 1])), acc[j]);
        acc[j] = _mm512_fnmadd_ps(m0, _mm512_set1_ps(mm->act.s32[at]), acc[j]);
        acc[j] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(mm->act.s32[at + 1]), acc[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store16(mm, g, t0 + j, acc[j]);
}

/* Q4_K against activations quantized per 256 (one d_x a super-block), as ggml's
 * q4_K . q8_K and q4k_row: d * d_x * sum_s sc_s sum(q x) - dmin * d_x * sum_s m_s sum(x),
 * both sums over the super-block in integers, the mins' once a super-block after the runs
 * (q4_k_min_pairs). Against the per-32 form's float step per sub-block and token, the
 * 5-token step of Qwen3-0.6B Q4_K_M and qwen3moe-mini measured 2.5-3.5% faster (steps of
 * both forms alternating in one process). */
static inline __attribute__((always_inline)) void q4_k_tile_int(const nk_mm *mm, int64_t g,
                                                                int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *grp = mm->w + g * 16 * mm->row_bytes;
  __m512 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = grp + i * NK_R16_Q4_K_BLOCK;
    __m512i isum[8];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) isum[j] = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++) {
      __m512i lo[8], hi[8];
      q4_k_run(mm, blk, i, q, t0, nt, lo, hi);
      const __m512i sc0 = q4_low_scales16(blk + NK_R16_Q4_K_SCALES + 32 * q),
                    sc1 = k4_bytes16(blk + NK_R16_Q4_K_SCALES + 16 + 32 * q);
#pragma GCC unroll 8
      for (int j = 0; j < nt; j++) {
        isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(lo[j], sc0));
        isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(hi[j], sc1));
      }
    }
    __m512i mins[4];
    q4_k_min_pairs(blk, mins);
    const __m512 d16 = q4_over16(q4_d(blk));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + NK_R16_Q4_K_DMIN)));
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const __m512 dk = _mm512_set1_ps(mm->act.dk[(t0 + j) * (kp / 256) + i]);
      const __m512i msum = bsum_dot(mins, mm->act.bsum32 + (t0 + j) * (kp / 32) + 8 * i, 4);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(d16, dk), acc[j]);
      acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dk), acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store16(mm, g, t0 + j, acc[j]);
}

/* The sixteen rows' scales of group g of a repacked Q6_K super-block, as int32. */
static inline __m512i q6_k_scales16(const uint8_t *blk, int g) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + NK_R16_Q6_K_SCALES + 16 * g)));
}

/* isum + sc * (w . x) over one group: four VPDPBUSDs of a token's 16 activations at xq. */
static inline __m512i q6_k_group_add(__m512i isum, const __m512i *w, __m512i sc, const int8_t *xq) {
  __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++) s = dpb4(s, w[u], xq + 4 * u);
  return _mm512_add_epi32(isum, _mm512_mullo_epi32(s, sc));
}

/* Six-bit weights: the low four bits from `nibbles`, bits 4-5 from `top`. */
static inline __m512i q6_k_merge(__m512i nibbles, __m512i top) {
  return _mm512_ternarylogic_epi32(nibbles, _mm512_set1_epi8(0x0F),
                                   _mm512_and_si512(top, _mm512_set1_epi8(0x30)), 0xEA);
}

/* Tokens from which a Q6_K tile decodes its quarters in two passes (q6_k_quarter_halves). */
#define Q6_K_HALVES_MIN 4

/* isum[j] += the sixteen rows' sums sc_k * (q . x) of quarter `quarter` (2n + h) of Q6_K
 * super-block i for token t0 + j, groups k = 8n + 2k' + h, k' = 0..3: its sixteen weight
 * vectors (columns 16h..16h+15 plus 0, 32, 64 and 96 of half n) decoded once for every
 * token of the tile. */
static inline __attribute__((always_inline)) void q6_k_quarter(const nk_mm *mm,
                                                               const uint8_t *blk, int64_t i,
                                                               int quarter, int64_t t0,
                                                               const int nt, int prefetch,
                                                               __m512i *isum) {
  const int n = quarter / 2, h = quarter % 2;
  const uint8_t *qs = blk + NK_R16_Q6_K_QS + 768 * quarter;
  __m512i w[4][4];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++) {
    /* A sixteenth of the super-block per unit: bursts of prefetches stall the loads. */
    if (prefetch) {
      nk_prefetch_ahead(mm, blk + NK_R16_Q6_K_BLOCK / 16 * (4 * quarter + u), NK_R16_Q6_K_BLOCK / 16);
    }
    const __m512i a = _mm512_loadu_si512(qs + 64 * u), b = _mm512_loadu_si512(qs + 256 + 64 * u);
    const __m512i hi = _mm512_loadu_si512(qs + 512 + 64 * u);
    w[0][u] = q6_k_merge(a, _mm512_slli_epi16(hi, 4));
    w[1][u] = q6_k_merge(b, _mm512_slli_epi16(hi, 2));
    w[2][u] = q6_k_merge(_mm512_srli_epi16(a, 4), hi);
    w[3][u] = q6_k_merge(_mm512_srli_epi16(b, 4), _mm512_srli_epi16(hi, 2));
  }
  __m512i sc[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) sc[k] = q6_k_scales16(blk, 8 * n + 2 * k + h);
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    const int8_t *xq = mm->act.q + (t0 + j) * mm->kp + 256 * i + 128 * n + 16 * h;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) isum[j] = q6_k_group_add(isum[j], w[k], sc[k], xq + 32 * k);
  }
}

/* q6_k_quarter in two passes of two groups, f and f + 2 (the low and high nibbles of one
 * run of low bits), so that eight weight vectors are live instead of sixteen beside the
 * tile's sums. Alternating in one process on the 2-core Zen 5 VM, the 151936 x 1024 output
 * matrix from memory took at 5 tokens 0.88-0.97x the time, at 16 0.93x, but at 1 and 2
 * tokens 1.03-1.09x: one pass below Q6_K_HALVES_MIN. The pass loop stays rolled: unrolled
 * it measured 1.02-1.10x slower. */
static inline __attribute__((always_inline)) void q6_k_quarter_halves(
    const nk_mm *mm, const uint8_t *blk, int64_t i, int quarter, int64_t t0, const int nt,
    int prefetch, __m512i *isum) {
  const int n = quarter / 2, h = quarter % 2;
  const uint8_t *qs = blk + NK_R16_Q6_K_QS + 768 * quarter;
  for (int f = 0; f < 2; f++) {
    __m512i w[2][4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      if (prefetch && f == 0) {
        nk_prefetch_ahead(mm, blk + NK_R16_Q6_K_BLOCK / 16 * (4 * quarter + u),
                          NK_R16_Q6_K_BLOCK / 16);
      }
      const __m512i run = _mm512_loadu_si512(qs + 256 * f + 64 * u);
      const __m512i hi = _mm512_loadu_si512(qs + 512 + 64 * u);
      w[0][u] = q6_k_merge(run, _mm512_slli_epi16(hi, 4 - 2 * f));
      w[1][u] = q6_k_merge(_mm512_srli_epi16(run, 4), f == 0 ? hi : _mm512_srli_epi16(hi, 2));
    }
    const __m512i sc0 = q6_k_scales16(blk, 8 * n + 2 * f + h),
                  sc1 = q6_k_scales16(blk, 8 * n + 2 * (f + 2) + h);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const int8_t *xq = mm->act.q + (t0 + j) * mm->kp + 256 * i + 128 * n + 16 * h;
      isum[j] = q6_k_group_add(isum[j], w[0], sc0, xq + 32 * f);
      isum[j] = q6_k_group_add(isum[j], w[1], sc1, xq + 32 * (f + 2));
    }
  }
}

/* Q6_K against activations quantized per 256 (nk_qact's dk and bsum): per super-block,
 * d * d_x * (sum over groups of sc * sum(q x) - 32 sum over groups of sc * sum(x)), q
 * unbiased (0-63), all in integers but the last step, as q6k_row. The second sum is eight
 * VPDPWSSDs per token (the rows' scales of two groups as int16 pairs against the token's
 * two group sums), where starting each group's sum at -32 sum(x) took three instructions
 * per group. A quarter of the super-block at a time (q6_k_quarter). */
static inline __attribute__((always_inline)) void q6_k_tile(const nk_mm *mm, int64_t g, int64_t t0,
                                                            const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *grp = mm->w + g * 16 * mm->row_bytes;
  __m512 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  const int prefetch = t0 == 0;
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = grp + i * NK_R16_Q6_K_BLOCK;
    /* Pair p: the sixteen rows' scales of groups 2p and 2p + 1, interleaved as int16. */
    __m512i pairs[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; p++) pairs[p] = row_pairs16(blk + NK_R16_Q6_K_SCALES + 32 * p, 1);
    __m512i isum[8];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const __m512i bias = bsum_dot(pairs, mm->act.bsum + (t0 + j) * (kp / 16) + 16 * i, 8);
      isum[j] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bias, 5));
    }
    for (int quarter = 0; quarter < 4; quarter++) {
      if (nt >= Q6_K_HALVES_MIN) {
        q6_k_quarter_halves(mm, blk, i, quarter, t0, nt, prefetch, isum);
      } else {
        q6_k_quarter(mm, blk, i, quarter, t0, nt, prefetch, isum);
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const float dk = mm->act.dk[(t0 + j) * (kp / 256) + i];
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(d, _mm512_set1_ps(dk)),
                               acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store16(mm, g, t0 + j, acc[j]);
}

#define CASE(tile, t) \
  case t: tile(mm, g, t0, t); break;

/* Q8_0 keeps one register of sums per token (two below five), up to sixteen tokens: past
 * twelve the compiler keeps some f32 sums in memory, and one pass over the weights for a
 * sixteen-token batch still beats two (370 against 440-500 us for a 3072 x 1024 product
 * on one thread). */
static void q8_0_tiles(const nk_mm *mm, int64_t g, int64_t t0, int nt) {
  switch (nt) {
    CASE(q8_0_tile, 1) CASE(q8_0_tile, 2) CASE(q8_0_tile, 3) CASE(q8_0_tile, 4)
    CASE(q8_0_tile, 5) CASE(q8_0_tile, 6) CASE(q8_0_tile, 7) CASE(q8_0_tile, 8)
    CASE(q8_0_tile, 9) CASE(q8_0_tile, 10) CASE(q8_0_tile, 11) CASE(q8_0_tile, 12)
    CASE(q8_0_tile, 13) CASE(q8_0_tile, 14) CASE(q8_0_tile, 15) CASE(q8_0_tile, 16)
    default: break;
  }
}

/* Q4_K keeps two (both nibbles' sums), up to eight tokens: sixteen measured no faster. */
static void q4_k_tiles(const nk_mm *mm, int64_t g, int64_t t0, int nt) {
  if (mm->act.dk) {
    switch (nt) {
      CASE(q4_k_tile_int, 1) CASE(q4_k_tile_int, 2) CASE(q4_k_tile_int, 3) CASE(q4_k_tile_int, 4)
      CASE(q4_k_tile_int, 5) CASE(q4_k_tile_int, 6) CASE(q4_k_tile_int, 7) CASE(q4_k_tile_int, 8)
      default: break;
    }
    return;
  }
  switch (nt) {
    CASE(q4_k_tile, 1) CASE(q4_k_tile, 2) CASE(q4_k_tile, 3) CASE(q4_k_tile, 4)
    CASE(q4_k_tile, 5) CASE(q4_k_tile, 6) CASE(q4_k_tile, 7) CASE(q4_k_tile, 8)
    default: break;
  }
}

/* Q6_K keeps one register of integer sums per token beside its f32 sums, up to eight. */
static void q6_k_tiles(const nk_mm *mm, int64_t g, int64_t t0, int nt) {
  switch (nt) {
    CASE(q6_k_tile, 1) CASE(q6_k_tile, 2) CASE(q6_k_tile, 3) CASE(q6_k_tile, 4)
    CASE(q6_k_tile, 5) CASE(q6_k_tile, 6) CASE(q6_k_tile, 7) CASE(q6_k_tile, 8)
    default: break;
  }
}

void nk_r16_rows_avx512(const nk_mm *mm, int64_t r0, int64_t r1) {
  if (mm->type == NK_Q4_K_R16 && mm->act.dk && mm->n_tokens >= NK_R16_PAIR_MIN) {
    /* Pairs of groups (kern_avx512_r16_pair.c), then the odd group left. */
    r0 = nk_r16_q4_k_pairs_avx512(mm, r0, r1);
  }
  /* Q6_K's integer sums need the per-256 activations, which a product sharing them with
   * per-32 types (Q8_0 beside Q6_K in one matmulMany) lacks: plain C computes that mix. */
  if (mm->type == NK_Q6_K_R16 && !mm->act.dk) {
    nk_r16_rows_portable(mm, r0, r1);
    return;
  }
  const int64_t n = mm->n_tokens, per = tile_tokens(n, mm->type == NK_Q8_0_R16 ? 16 : 8);
  for (int64_t g = r0 / 16; g < r1 / 16; g++) {
    for (int64_t t0 = 0; t0 < n; t0 += per) {
      const int nt = (int)(n - t0 < per ? n - t0 : per);
      switch (mm->type) {
        case NK_Q8_0_R16: q8_0_tiles(mm, g, t0, nt); break;
        case NK_Q4_K_R16: q4_k_tiles(mm, g, t0, nt); break;
        default: q6_k_tiles(mm, g, t0, nt); break;
      }
    }
  }
}
