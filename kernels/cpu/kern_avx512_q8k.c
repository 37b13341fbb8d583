/*
 * AVX-512 mat-vec for Q4_K and Q6_K against activations quantized per 256 (nk_qact's
 * per-256 form, ggml's Q8_K). With one activation scale per super-block, a super-block's
 * products add up in integers: VPDPBUSD gives int32 sums of four weight x activation
 * products, VPACKSSDW narrows two such vectors to int16 (the sums fit: at most
 * 4 * 63 * 127), and VPMADDWD multiplies them by the sub-block scales and adds pairs. One
 * conversion to float per super-block replaces one per 32 values, which took the per-32
 * kernels (kern_avx512_decode.c) about as long as the memory they read. Q4_K's kernel is
 * kern_avx512_q4k.h, which the VBMI level builds too.
 */
#include "kern_avx512_q4k.h"

/* The int16 scale for each lane of packs(a, b): lane group j (of four 32-bit lanes, one
 * per 128 bits) of a VPDPBUSD result sums values 16j..16j+15 of its 64, in order. */
static __m512i q6k_scale_index(int second_half) {
  _Alignas(64) int16_t idx[32];
  for (int e = 0; e < 32; e++) {
    const int k = e / 8, from_b = e % 8 >= 4;
    idx[e] = (int16_t)((second_half ? 8 : 0) + (from_b ? 4 : 0) + k);
  }
  return _mm512_load_si512(idx);
}

/* Q6_K: 6-bit values (ql nibbles, qh pairs) biased by 32, sixteen int8 scales per
 * super-block; the bias comes off as 32 * sum(scale * activation sum of 16). */
static inline __attribute__((always_inline)) void q6k_row(const nk_mm *mm, const __m512i *ix,
                                                          int64_t r, int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512 acc[NK_ROW_TOKENS_WIDE];
#pragma GCC unroll 8
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
#pragma GCC unroll 8
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
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(acc[j]);
}

#define ROWS_BY_TOKENS(fn, ix)             \
  for (int64_t r = r0; r < r1; r++) {      \
    switch (nt) {                          \
      case 1: fn(mm, ix, r, t0, 1); break; \
      case 2: fn(mm, ix, r, t0, 2); break; \
      case 3: fn(mm, ix, r, t0, 3); break; \
      case 4: fn(mm, ix, r, t0, 4); break; \
      case 5: fn(mm, ix, r, t0, 5); break; \
      case 6: fn(mm, ix, r, t0, 6); break; \
      case 7: fn(mm, ix, r, t0, 7); break; \
      default: fn(mm, ix, r, t0, 8); break; \
    }                                      \
  }

int nk_qdot_q8k_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  if (!mm->act.dk) return 0;
  switch (mm->type) {
    case NK_Q4_K: q4k_rows(mm, r0, r1, t0, nt); return 1;
    case NK_Q6_K: {
      const __m512i ix[2] = {q6k_scale_index(0), q6k_scale_index(1)};
      ROWS_BY_TOKENS(q6k_row, ix)
      return 1;
    }
    default: return 0;
  }
}
