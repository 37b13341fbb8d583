/* Shared between the AVX-512 kernel sources. */
#ifndef NK_KERN_AVX512_H
#define NK_KERN_AVX512_H

#include "nk_internal.h"

/* Rows [r0, r1) x tokens [t0, t0 + nt) through a kernel fused for the type; 0 when the
 * type has none (the generic chunk path then runs). */
int nk_qdot_fused_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);

/* The AVX-512 level's row kernel, which the VBMI level (kern_avx512vbmi.c) falls back to. */
void nk_qdot_rows_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);

/* The same for Q4_K and Q6_K when the activations have their per-256 form
 * (kern_avx512_q8k.c); 0 otherwise. */
int nk_qdot_q8k_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);

/* Chunk ch of a row in the chunk form, fused for the types the row kernels are fused for;
 * 0 when the generic nk_unpack has to run instead (kern_avx512_decode.c). */
int nk_unpack_fused_avx512(const nk_mm *mm, const uint8_t *row, int64_t ch, nk_chunk *c);

/* The same for Q4_0, Q4_1, Q5_0 and Q5_1 (kern_avx512_legacy.c). */
int nk_qdot_legacy_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);

/* Attention for tokens [t0, t0 + nt) of one kv head (kern_avx512_attention.c); 0 when the
 * head size is not a multiple of 16 up to 256 (the portable loop then runs). */
int nk_attend_avx512(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh, float *scratch);
/* A decode sequence's attention over positions [p_begin, p_end), all kv heads
 * (kern_avx512_attention_split.c), as the op attend_split; 0 when its head size or rows
 * per kv head do not suit it. */
int nk_attend_span_avx512(const nk_attn *a, int64_t p_begin, int64_t p_end, float *scratch,
                           float *part);

#if defined(__AVX512F__)
#include <immintrin.h>
#include <string.h>

/* The f16 at p (GGUF block scales), as f32. */
static inline float nk_f16_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

/* A Q6_K block's 256 values unbiased (0-63: low nibbles from ql, top two bits from qh):
 * w[p] holds values 64p..64p+63 in order. */
static inline void nk_q6_k_values(const uint8_t *blk, __m512i w[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), low2 = _mm512_set1_epi8(0x03);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
  for (int n = 0; n < 2; n++) {
    const __m512i l = _mm512_loadu_si512(blk + 64 * n);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
    const __m512i hd = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
    /* (l & 0x0F) | ((hd & 3) << 4), then (l >> 4 & 0x0F) | (hd & 0x30) */
    w[2 * n] =
        _mm512_ternarylogic_epi32(l, low4, _mm512_slli_epi16(_mm512_and_si512(hd, low2), 4), 0xEA);
    w[2 * n + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), low4,
                                             _mm512_and_si512(hd, bits45), 0xEA);
  }
}

/* Lanes 0-7 take element 2k of a scale vector, lanes 8-15 element 2k + 1. */
static inline __m512i nk_pair_index(int k) {
  return _mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                          2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k,
                          2 * k);
}
#endif

#endif
