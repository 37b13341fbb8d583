/*
 * AVX-512 mat-vec for Q4_K and Q6_K against activations quantized per 256 (nk_qact's
 * per-256 form, ggml's Q8_K). With one activation scale per super-block, a super-block's
 * products add up in integers: VPDPBUSD gives int32 sums of four weight x activation
 * products, VPACKSSDW narrows two such vectors to int16 (the sums fit: at most
 * 4 * 63 * 127), and VPMADDWD multiplies them by the sub-block scales and adds pairs. One
 * conversion to float per super-block replaces one per 32 values, which took the per-32
 * kernels (kern_avx512_decode.c) about as long as the memory they read.
 *
 * Q4_K goes four super-blocks at a time: their scale bytes are decoded in one register,
 * and their mins meet the activation sums in two VPMADDWDs. Its nibbles pair with the
 * activations reordered like them (act.q4k), so no shuffle rebuilds the value order.
 */
#include "isa_common.h"
#include "kern_avx512.h"

/* Super-blocks one Q4_K step decodes together. */
#define Q4K_GROUP 4

/*
 * The int16 scale for each lane of packs(a, b): lane group k (of four 32-bit lanes, one
 * per 128 bits) of a VPDPBUSD result sums sub-block values 16k..16k+15 of its 64. Q4_K's
 * a pairs low nibbles with values [0-31, 64-95] (sub-blocks 0 and 2 of a half), b high
 * nibbles with [32-63, 96-127] (1 and 3); Q6_K's vectors hold groups of 16 in order.
 */
static __m512i q4k_scale_index(int second_half, int sb_offset) {
  _Alignas(64) int16_t idx[32];
  for (int e = 0; e < 32; e++) {
    const int k = e / 8, from_b = e % 8 >= 4;
    idx[e] = (int16_t)(sb_offset + (second_half ? 4 : 0) + from_b + (k < 2 ? 0 : 2));
  }
  return _mm512_load_si512(idx);
}

static __m512i q6k_scale_index(int second_half) {
  _Alignas(64) int16_t idx[32];
  for (int e = 0; e < 32; e++) {
    const int k = e / 8, from_b = e % 8 >= 4;
    idx[e] = (int16_t)((second_half ? 8 : 0) + (from_b ? 4 : 0) + k);
  }
  return _mm512_load_si512(idx);
}

/* Each of a super-block pair's eight mins twice, next to its two sums of 16: the int16
 * layout is [scales 0-7, mins 0-7] per super-block. */
static __m512i q4k_min_index(void) {
  _Alignas(64) int16_t idx[32];
  for (int e = 0; e < 32; e++) idx[e] = (int16_t)((e < 16 ? 8 : 24) + (e % 16) / 2);
  return _mm512_load_si512(idx);
}

/* Scales then mins (6 bits each) of up to four Q4_K blocks, one block per 128 bits. */
static inline __m512i q4k_scales_mins(const uint8_t *blk, int g) {
  __m512i raw = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(blk + 4)));
  if (g > 1) raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(blk + 148)), 1);
  if (g > 2) raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(blk + 292)), 2);
  if (g > 3) raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i *)(blk + 436)), 3);
  const __m512i a = _mm512_shuffle_epi8(
      raw, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m512i b = _mm512_shuffle_epi8(
      raw, _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7)));
  const __m512i top = _mm512_and_si512(_mm512_srli_epi16(b, 2), _mm512_set1_epi8(0x30));
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i low6 = _mm512_and_si512(a, _mm512_set1_epi8(0x3F));
  /* (x & 0x0F) | top */
  const __m512i lo4 = _mm512_ternarylogic_epi32(a, low4, top, 0xEA);
  const __m512i hi4 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 4), low4, top, 0xEA);
  return _mm512_mask_blend_epi32(0x8888, _mm512_mask_blend_epi32(0x2222, low6, lo4), hi4);
}

typedef struct {
  __m512i scale[4], mins;
} q4k_index;

/* g (1 to 4) Q4_K super-blocks from super-block i of row r, for nt tokens. */
static inline __attribute__((always_inline)) void q4k_group(const nk_mm *mm, const q4k_index *ix,
                                                            const uint8_t *blk, int64_t i, int g,
                                                            int64_t t0, const int nt,
                                                            __m512 *acc, __m512 *macc) {
  const int64_t kp = mm->kp;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i sm = q4k_scales_mins(blk, g);
  const __m512i sm01 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm));
  const __m512i sm23 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1));
  int32_t dbits[4] = {0, 0, 0, 0};
  for (int k = 0; k < Q4K_GROUP; k++) {
    if (k < g) memcpy(&dbits[k], blk + 144 * k, 4);
  }
  /* d0 dmin0 d1 dmin1 ... */
  const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dbits));
  const __m512i mins01 = _mm512_permutexvar_epi16(ix->mins, sm01);
  const __m512i mins23 = _mm512_permutexvar_epi16(ix->mins, sm23);
  const __mmask16 live = (__mmask16)((1u << g) - 1);
  const __mmask32 bs_lo = g >= 2 ? 0xFFFFFFFFu : 0xFFFFu, bs_hi = g >= 4 ? 0xFFFFFFFFu : g == 3 ? 0xFFFFu : 0;
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    const int64_t t = t0 + j;
    const __m128 dk = _mm_maskz_loadu_ps(live, mm->act.dk + t * (kp / 256) + i);
    const __m512 f = _mm512_castps256_ps512(_mm256_mul_ps(
        dd, _mm256_permutexvar_ps(_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3),
                                  _mm256_castps128_ps256(dk))));
    for (int k = 0; k < g; k++) {
      const uint8_t *qs = blk + 144 * k + 16;
      const int8_t *xq = mm->act.q4k + t * kp + (i + k) * 256;
      const __m512i z0 = _mm512_loadu_si512(qs), z1 = _mm512_loadu_si512(qs + 64);
      const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(z0, low4),
                                             _mm512_loadu_si512(xq));
      const __m512i d1 = _mm512_dpbusd_epi32(
          _mm512_setzero_si512(), _mm512_and_si512(_mm512_srli_epi16(z0, 4), low4),
          _mm512_loadu_si512(xq + 64));
      const __m512i d2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(z1, low4),
                                             _mm512_loadu_si512(xq + 128));
      const __m512i d3 = _mm512_dpbusd_epi32(
          _mm512_setzero_si512(), _mm512_and_si512(_mm512_srli_epi16(z1, 4), low4),
          _mm512_loadu_si512(xq + 192));
      const __m512i smk = k < 2 ? sm01 : sm23;
      const __m512i s01 = _mm512_permutexvar_epi16(ix->scale[2 * (k & 1)], smk);
      const __m512i s23 = _mm512_permutexvar_epi16(ix->scale[2 * (k & 1) + 1], smk);
      const __m512i sum = _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(d0, d1), s01),
                                           _mm512_madd_epi16(_mm512_packs_epi32(d2, d3), s23));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                               _mm512_permutexvar_ps(_mm512_set1_epi32(2 * k), f), acc[j]);
    }
    const int16_t *bs = mm->act.bsum + t * (kp / 16) + 16 * i;
    const __m512i m01 = _mm512_madd_epi16(_mm512_maskz_loadu_epi16(bs_lo, bs), mins01);
    const __m512i m23 = _mm512_madd_epi16(_mm512_maskz_loadu_epi16(bs_hi, bs + 32), mins23);
    macc[j] = _mm512_fmadd_ps(
        _mm512_cvtepi32_ps(m01),
        _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), f),
        macc[j]);
    macc[j] = _mm512_fmadd_ps(
        _mm512_cvtepi32_ps(m23),
        _mm512_permutexvar_ps(_mm512_setr_epi32(5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7), f),
        macc[j]);
  }
}

static inline __attribute__((always_inline)) void q4k_row(const nk_mm *mm, const q4k_index *ix,
                                                          int64_t r, int64_t t0, const int nt) {
  const int64_t nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512 acc[4], macc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j] = macc[j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + Q4K_GROUP <= nsb; i += Q4K_GROUP) {
    const uint8_t *blk = row + i * 144;
    nk_prefetch_ahead(mm, blk, Q4K_GROUP * 144);
    q4k_group(mm, ix, blk, i, Q4K_GROUP, t0, nt, acc, macc);
  }
  if (i < nsb) q4k_group(mm, ix, row + i * 144, i, (int)(nsb - i), t0, nt, acc, macc);
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[j], macc[j]));
  }
}

/* Q6_K: 6-bit values (ql nibbles, qh pairs) biased by 32, sixteen int8 scales per
 * super-block; the bias comes off as 32 * sum(scale * activation sum of 16). */
static inline __attribute__((always_inline)) void q6k_row(const nk_mm *mm, const __m512i *ix,
                                                          int64_t r, int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512 acc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = row + i * 210;
    nk_prefetch_ahead(mm, blk, 210);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    const __m512i s01 = _mm512_permutexvar_epi16(ix[0], _mm512_castsi256_si512(sc));
    const __m512i s23 = _mm512_permutexvar_epi16(ix[1], _mm512_castsi256_si512(sc));
    const float d = nk_f16_at(blk + 208);
    __m512i w[4];
    nk_q6_k_values(blk, w);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const int8_t *xq = mm->act.q + t * kp + i * 256;
      __m512i dp[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; p++) {
        dp[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p], _mm512_loadu_si512(xq + 64 * p));
      }
      const __m256i bs = _mm256_loadu_si256((const __m256i *)(mm->act.bsum + t * (kp / 16) + 16 * i));
      const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc), 5);
      const __m512i sum = _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(dp[0], dp[1]), s01),
                                           _mm512_madd_epi16(_mm512_packs_epi32(dp[2], dp[3]), s23));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, _mm512_zextsi256_si512(bias))),
                               _mm512_set1_ps(d * mm->act.dk[t * (kp / 256) + i]), acc[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(acc[j]);
}

#define ROWS_BY_TOKENS(fn, ix)             \
  for (int64_t r = r0; r < r1; r++) {      \
    switch (nt) {                          \
      case 1: fn(mm, ix, r, t0, 1); break; \
      case 2: fn(mm, ix, r, t0, 2); break; \
      case 3: fn(mm, ix, r, t0, 3); break; \
      default: fn(mm, ix, r, t0, 4); break; \
    }                                      \
  }

int nk_qdot_q8k_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  if (!mm->act.dk) return 0;
  switch (mm->type) {
    case NK_Q4_K: {
      const q4k_index ix = {
          .scale = {q4k_scale_index(0, 0), q4k_scale_index(1, 0), q4k_scale_index(0, 16),
                    q4k_scale_index(1, 16)},
          .mins = q4k_min_index()};
      ROWS_BY_TOKENS(q4k_row, &ix)
      return 1;
    }
    case NK_Q6_K: {
      const __m512i ix[2] = {q6k_scale_index(0), q6k_scale_index(1)};
      ROWS_BY_TOKENS(q6k_row, ix)
      return 1;
    }
    default: return 0;
  }
}
