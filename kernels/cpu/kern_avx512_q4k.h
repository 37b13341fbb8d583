/*
 * AVX-512 Q4_K mat-vec against activations quantized per 256 (ggml's Q8_K), included by
 * kern_avx512_q8k.c and, built with VBMI, by kern_avx512vbmi.c. A super-block's products
 * add up in integers: VPDPBUSD gives int32 sums of four weight x activation products,
 * VPACKSSDW narrows two such vectors to int16 (the sums fit: at most 4 * 15 * 127), and
 * VPMADDWD multiplies them by the sub-block scales and adds pairs. One conversion to float
 * per super-block replaces one per 32 values.
 *
 * Four super-blocks go at a time: their scale bytes are decoded in one register, and
 * their mins meet the activation sums in two VPMADDWDs. The nibbles pair with the
 * activations reordered like them (act.q4k), so no shuffle rebuilds the value order.
 *
 * The scale vectors are picked out of the decoded bytes by permutes. VBMI's VPERMB picks
 * bytes, zeroing each int16's high byte through its mask; without it the bytes are widened
 * to int16 first (two VPMOVZXBW) for VPERMW, which is also two uops where VPERMB is one.
 * In a decode stream that is 2.5% of Q4_K's speed.
 */
#ifndef NK_KERN_AVX512_Q4K_H
#define NK_KERN_AVX512_Q4K_H

#include "isa_common.h"
#include "kern_avx512.h"

/* Super-blocks one step decodes together. */
#define Q4K_GROUP 4
#define Q4K_BLOCK 144

/* Scales then mins (6 bits each) of up to four blocks, one block per 128 bits. */
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

#if defined(__AVX512VBMI__)
/* The decoded bytes themselves; an index names a byte (block k's are 16k..16k+15), and
 * an int16 index vector serves as VPERMB's: the low byte of each int16 picks. */
typedef __m512i q4k_source;
#define Q4K_BASE(k) (16 * (k))
#define Q4K_PAIR_BASE(pair) (32 * (pair))

static inline q4k_source q4k_widen(__m512i sm) {
  return sm;
}

/* Every int16 of the result is the byte idx names, zero-extended: the mask keeps the even
 * (low) bytes. */
static inline __m512i q4k_pick(__m512i idx, q4k_source s, int k) {
  (void)k;
  return _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, idx, s);
}

#else
/* Blocks 0-1 and 2-3 widened to int16; an index names an int16 of one pair (block k's
 * are 16(k % 2)..16(k % 2) + 15). */
typedef struct {
  __m512i lo, hi;
} q4k_source;
#define Q4K_BASE(k) (16 * ((k) & 1))
#define Q4K_PAIR_BASE(pair) 0

static inline q4k_source q4k_widen(__m512i sm) {
  return (q4k_source){_mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm)),
                      _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1))};
}

static inline __m512i q4k_pick(__m512i idx, q4k_source s, int k) {
  return _mm512_permutexvar_epi16(idx, k < 2 ? s.lo : s.hi);
}
#endif

typedef struct {
  /* scale[k][h]: block k's sub-block scales for packs(d0, d1) (h = 0) and packs(d2, d3). */
  __m512i scale[Q4K_GROUP][2];
  /* mins[p]: the mins of blocks 2p and 2p + 1, each twice, beside their sums of 16. */
  __m512i mins[2];
} q4k_index;

/*
 * The int16 scale for each lane of packs(a, b): lane group j (of four 32-bit lanes, one
 * per 128 bits) of a VPDPBUSD result sums sub-block values 16j..16j+15 of its 64. The low
 * nibbles pair with values [0-31, 64-95] (sub-blocks 0 and 2 of a half), the high ones
 * with [32-63, 96-127] (1 and 3). A block's int16 layout is [scales 0-7, mins 0-7].
 */
static inline q4k_index q4k_indexes(void) {
  q4k_index ix;
  _Alignas(64) int16_t idx[32];
  for (int k = 0; k < Q4K_GROUP; k++) {
    for (int h = 0; h < 2; h++) {
      for (int e = 0; e < 32; e++) {
        const int j = e / 8, from_b = e % 8 >= 4;
        idx[e] = (int16_t)(Q4K_BASE(k) + 4 * h + from_b + (j < 2 ? 0 : 2));
      }
      ix.scale[k][h] = _mm512_load_si512(idx);
    }
  }
  for (int p = 0; p < 2; p++) {
    for (int e = 0; e < 32; e++) idx[e] = (int16_t)(Q4K_PAIR_BASE(p) + (e < 16 ? 8 : 24) + (e % 16) / 2);
    ix.mins[p] = _mm512_load_si512(idx);
  }
  return ix;
}

/* g (1 to 4) blocks from block i of a row, for nt tokens. Each block's step requests its
 * share of the lines ahead: spread out, the requests keep memory busy through the
 * arithmetic (a decode stream 1-2% faster than with a group's issued at once). */
static inline __attribute__((always_inline)) void q4k_group(const nk_mm *mm, const q4k_index *ix,
                                                            const uint8_t *blk, int64_t i, int g,
                                                            int64_t t0, const int nt,
                                                            __m512 *acc, __m512 *macc) {
  const int64_t kp = mm->kp;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const q4k_source src = q4k_widen(q4k_scales_mins(blk, g));
  int32_t dbits[Q4K_GROUP] = {0, 0, 0, 0};
  for (int k = 0; k < Q4K_GROUP; k++) {
    if (k < g) memcpy(&dbits[k], blk + Q4K_BLOCK * k, 4);
  }
  /* d0 dmin0 d1 dmin1 ... */
  const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dbits));
  const __m512i mins01 = q4k_pick(ix->mins[0], src, 0);
  const __m512i mins23 = q4k_pick(ix->mins[1], src, 2);
  const __mmask16 live = (__mmask16)((1u << g) - 1);
  const __mmask32 bs_lo = g >= 2 ? 0xFFFFFFFFu : 0xFFFFu, bs_hi = g >= 4 ? 0xFFFFFFFFu : g == 3 ? 0xFFFFu : 0;
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    const int64_t t = t0 + j;
    const __m128 dk = _mm_maskz_loadu_ps(live, mm->act.dk + t * (kp / 256) + i);
    const __m512 f = _mm512_castps256_ps512(_mm256_mul_ps(
        dd, _mm256_permutexvar_ps(_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3),
                                  _mm256_castps128_ps256(dk))));
    for (int k = 0; k < g; k++) {
      if (j == 0) nk_prefetch_lines(mm, blk + Q4K_BLOCK * k, Q4K_BLOCK);
      const uint8_t *qs = blk + Q4K_BLOCK * k + 16;
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
      const __m512i s01 = q4k_pick(ix->scale[k][0], src, k);
      const __m512i s23 = q4k_pick(ix->scale[k][1], src, k);
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
  __m512 acc[NK_ROW_TOKENS_WIDE], macc[NK_ROW_TOKENS_WIDE];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc[j] = macc[j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + Q4K_GROUP <= nsb; i += Q4K_GROUP) {
    nk_prefetch_pages(mm, row + i * Q4K_BLOCK, Q4K_GROUP * Q4K_BLOCK);
    q4k_group(mm, ix, row + i * Q4K_BLOCK, i, Q4K_GROUP, t0, nt, acc, macc);
  }
  if (i < nsb) q4k_group(mm, ix, row + i * Q4K_BLOCK, i, (int)(nsb - i), t0, nt, acc, macc);
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[j], macc[j]));
  }
}

/* Rows [r0, r1) of a Q4_K matrix for tokens [t0, t0 + nt), nt <= NK_ROW_TOKENS_WIDE. */
static inline void q4k_rows(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  const q4k_index ix = q4k_indexes();
  for (int64_t r = r0; r < r1; r++) {
    switch (nt) {
      case 1: q4k_row(mm, &ix, r, t0, 1); break;
      case 2: q4k_row(mm, &ix, r, t0, 2); break;
      case 3: q4k_row(mm, &ix, r, t0, 3); break;
      case 4: q4k_row(mm, &ix, r, t0, 4); break;
      case 5: q4k_row(mm, &ix, r, t0, 5); break;
      case 6: q4k_row(mm, &ix, r, t0, 6); break;
      case 7: q4k_row(mm, &ix, r, t0, 7); break;
      default: q4k_row(mm, &ix, r, t0, 8); break;
    }
  }
}

#endif
