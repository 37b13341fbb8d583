/*
 * What the AVX-512 products with repacked weights share (kern_avx512_r16.c, one group of
 * sixteen rows a tile; kern_avx512_r16_pair.c, two).
 *
 * What bounds a few-token tile, measured on the 2-core Zen 5 VM (TSC 2.1 GHz): VPDPBUSD,
 * VPDPWSSD, VPMULLD, VFMADD and VMULPS share two pipes (twelve independent VPDPBUSDs take
 * 3.55 ticks, with four VPMULLDs, VPDPWSSDs or FMAs beside them 4.7-4.9), while VPADDD,
 * VPANDD, VCVTDQ2PS and VADDPS issue beside them for free; a lone VPDPBUSD chain waits
 * 2.4 ticks a step. So a Q4_K run of five tokens (80 VPDPBUSDs, 10 VPMULLDs for the
 * scales, the mins' VPDPWSSDs) cannot take under ~28 ticks, and takes 31.4 in cache
 * (90%); Q6_K (four VPDPBUSDs and a VPMULLD per group of 16) reaches 72% of its bound,
 * 45 ticks a quarter. Five-token tiles over two groups, sharing each activation broadcast,
 * measured 30.9 against 31.6 ticks (Q4_K) and 50.5 against 45 (Q6_K): the loads are not
 * the bound.
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

/*
 * Q4_K's high nibbles are multiplied where they lie, as 16 times their values (one AND
 * where shifting them down took two instructions), so an integer sum of them is 16 times
 * the true one. The integer forms scale the low nibbles' sums by 16 as well (their scales
 * times 16) and the super-block's float scale by 1/16; the float form scales the high sums
 * by d / 16. Both are exact (int32 sums stay below 2^29; scaling by a power of two commutes
 * with rounding), so the results are bit for bit the shifted form's. Against it, with the
 * weights loaded once (q4_bytes), a 5-token tile of cache-resident weights measured 0.94x
 * the time on the 2-core Zen 5 VM, and 5-token products from memory 0.91-0.92x.
 */

/* 64 bytes of Q4_K nibbles for a tile of nt tokens. From two tokens on loaded once: GCC
 * would otherwise fold the load into both the low and the high nibbles' instruction, two
 * loads of the same bytes. For one token the folded loads measured 4% faster (1-row
 * products from memory), so there GCC keeps its way. */
static inline __attribute__((always_inline)) __m512i q4_bytes(const uint8_t *p, const int nt) {
  __m512i v = _mm512_loadu_si512(p);
  if (nt > 1) __asm__("" : "+v"(v));
  return v;
}

/* The high nibbles of v in place: 16 times their values. */
static inline __m512i q4_high16(__m512i v) {
  return _mm512_andnot_si512(_mm512_set1_epi8(0x0F), v);
}

/* The sixteen rows' scales of a low-nibble sub-block at p, times 16 (q4_high16's factor). */
static inline __m512i q4_low_scales16(const uint8_t *p) {
  return _mm512_slli_epi32(k4_bytes16(p), 4);
}

/* A repacked Q4_K super-block's sixteen rows' d. */
static inline __m512 q4_d(const uint8_t *blk) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
}

/* d over 16 (q4_high16's factor). */
static inline __m512 q4_over16(__m512 d) {
  return _mm512_mul_ps(d, _mm512_set1_ps(1.0f / 16));
}

/* Tokens per tile when n tokens go in tiles of at most `most`, as evenly as they can: 17
 * tokens by 16 go as 9 + 8, not 16 + 1. */
static inline int64_t tile_tokens(int64_t n, int64_t most) {
  const int64_t tiles = (n + most - 1) / most;
  return (n + tiles - 1) / tiles;
}

/* The 32 bytes at p (the sixteen rows' values of one sub-block, then of the next; signed
 * or not) as int16 pairs: row r's two values in lane r. */
static inline __m512i row_pairs16(const uint8_t *p, const int is_signed) {
  /* Words 0-15 (the first sub-block) and 16-31 (the second) to row r's pair at 2r, 2r + 1. */
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25,
                                              9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2,
                                              17, 1, 16, 0);
  const __m256i two = _mm256_loadu_si256((const __m256i *)p);
  return _mm512_permutexvar_epi16(interleave, is_signed ? _mm512_cvtepi8_epi16(two)
                                                        : _mm512_cvtepu8_epi16(two));
}

/* sum over p < n of VPDPWSSD(pairs[p], the token's sums s[2p], s[2p + 1]): a super-block's
 * per-row int16 pairs against its sums (Q6_K's scales against the sixteen sums of 16,
 * Q4_K's mins against the eight of 32). */
static inline __attribute__((always_inline)) __m512i bsum_dot(const __m512i *pairs,
                                                              const int16_t *s, const int n) {
  __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int p = 0; p < n; p++) acc = dpw2(acc, pairs[p], s + 2 * p);
  return acc;
}

/* A repacked Q4_K super-block's mins as row_pairs16 of sub-blocks 2p and 2p + 1, which
 * bsum_dot meets with the token's sums of 32 (nk_qact's bsum32): four VPDPWSSDs a token
 * and super-block, where each min paired with itself against the two sums of 16 took
 * eight. */
static inline void q4_k_min_pairs(const uint8_t *blk, __m512i pairs[4]) {
#pragma GCC unroll 4
  for (int p = 0; p < 4; p++) pairs[p] = row_pairs16(blk + NK_R16_Q4_K_MINS + 32 * p, 0);
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
