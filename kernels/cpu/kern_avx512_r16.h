/*
 * What the AVX-512 products with repacked weights share (kern_avx512_r16.c, one group of
 * sixteen rows a tile; kern_avx512_r16_pair.c, two).
 */
#ifndef NK_KERN_AVX512_R16_H
#define NK_KERN_AVX512_R16_H

#include "isa_common.h"
#include "kern_avx512.h"

typedef int32_t __attribute__((may_alias)) act_quad;

/* acc + VPDPBUSD(w, the broadcast of activations q[0..3]), the broadcast folded into the
 * instruction's memory operand ({1to16}). GCC emits a separate VPBROADCASTD for
 * _mm512_set1_epi32 of a loaded value; folded, a chain of them measured 8% faster on the
 * Zen 4 VM (0.97 against 1.05 cycles each), and 16 streams of qwen3moe-mini Q4_K_M
 * decoded 179 and 194 tok/s against 164 and 175 (runs alternating). */
static inline __m512i dpb4(__m512i acc, __m512i w, const int8_t *q) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const act_quad *)q));
  return acc;
}

/* acc + VPDPWSSD(w, the broadcast of the int16 pair p[0..1]), folded as dpb4. */
static inline __m512i dpw2(__m512i acc, __m512i w, const int16_t *p) {
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const act_quad *)p));
  return acc;
}

/* The sixteen results of group g for token t. */
static inline void store16(const nk_mm *mm, int64_t g, int64_t t, __m512 v) {
  _mm512_storeu_ps(nk_y_row(mm, t) + g * 16, v);
}

/* The sixteen rows' bytes at p (scales or mins of one sub-block) as int32. */
static inline __m512i k4_bytes16(const uint8_t *p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* Tokens per tile when n tokens go in tiles of at most `most`, as evenly as they can: 17
 * tokens by 16 go as 9 + 8, not 16 + 1. */
static inline int64_t tile_tokens(int64_t n, int64_t most) {
  const int64_t tiles = (n + most - 1) / most;
  return (n + tiles - 1) / tiles;
}

/* sum over p < 8 of VPDPWSSD(pairs[p], the token's sums of 16 bsum[2p], bsum[2p + 1]): a
 * super-block's per-row int16 pairs (Q6_K's scales, Q4_K's mins) against its sixteen sums. */
static inline __m512i bsum_dot8(const __m512i *pairs, const int16_t *bsum) {
  __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int p = 0; p < 8; p++) acc = dpw2(acc, pairs[p], bsum + 2 * p);
  return acc;
}

/* Tokens from which Q4_K (per-256 activations) goes two groups a tile, four tokens at most.
 * Against one group of up to eight, products alternating in one process on the 2-core Zen 5
 * VM, weights from memory: 3072 x 1024 at 2-5 tokens 1.10-1.20x the time, 8 1.00x, 16
 * 0.94x, 64 0.91x; 1024 x 3072 at 8-16 tokens 0.95x, 32-64 0.91x; in cache 8-16 tokens
 * 0.86x. Qwen3-0.6B Q4_K_M pp512: 612 -> 693 and 605 -> 643 tok/s. */
#define NK_R16_PAIR_MIN 8

/* The Q4_K rows [r0, r1) (whole groups) by pairs of groups, every token; returns the first
 * row it left, the last group's when their count is odd. */
int64_t nk_r16_q4_k_pairs_avx512(const nk_mm *mm, int64_t r0, int64_t r1);

#endif
