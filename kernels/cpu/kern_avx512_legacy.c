/*
 * AVX-512 mat-vec kernels fused for the legacy 32-blocks with 4-bit quants (Q4_0, Q4_1,
 * Q5_0, Q5_1), on the pattern of Q8_0 in kern_avx512_decode.c: sixteen blocks' f16 scales
 * (and mins) gathered at once, two blocks' 64 values per VPDPBUSD. A block's sixteen qs
 * bytes hold values 0-15 in their low nibbles and 16-31 in their high nibbles; Q5's 32-bit
 * qh holds bit 4 of value j in bit j.
 */
#include "isa_common.h"
#include "kern_avx512.h"

typedef struct {
  int32_t block; /* bytes per block */
  int32_t qs;    /* offset of qs */
  int32_t qh;    /* offset of qh, or -1 */
  int32_t min;   /* offset of the f16 min, or -1 */
  float offset;  /* value = d * (u + offset) [+ min] */
} legacy_layout;

static const legacy_layout Q4_0 = {18, 2, -1, -1, -8.0f};
static const legacy_layout Q4_1 = {20, 4, -1, 2, 0.0f};
static const legacy_layout Q5_0 = {22, 6, 2, -1, -16.0f};
static const legacy_layout Q5_1 = {24, 8, 4, 2, 0.0f};

/* 32 unsigned values of one block. */
static inline __m256i block_values(const uint8_t *blk, const legacy_layout *l) {
  const __m128i qs = _mm_loadu_si128((const __m128i *)(blk + l->qs));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  __m256i u = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(qs, low4)),
                                      _mm_and_si128(_mm_srli_epi16(qs, 4), low4), 1);
  if (l->qh >= 0) {
    uint32_t qh;
    memcpy(&qh, blk + l->qh, 4);
    u = _mm256_or_si256(u, _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10)));
  }
  return u;
}

static inline __attribute__((always_inline)) void legacy_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                             const int nt, const legacy_layout *l) {
  const int64_t kp = mm->kp, nb = mm->cols / 32;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  const __m512i offsets =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(l->block));
  __m512 acc[4][2], corr[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j][0] = acc[j][1] = corr[j] = _mm512_setzero_ps();
  float tail[4] = {0, 0, 0, 0};
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const uint8_t *blk = row + b * l->block;
    const __m512 dw =
        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offsets, blk, 1)));
    /* Per block: min (Q4_1, Q5_1) or d * offset, times the activation block sum. */
    const __m512 mw = l->min >= 0 ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
                                        _mm512_i32gather_epi32(offsets, blk + l->min, 1)))
                                  : _mm512_mul_ps(dw, _mm512_set1_ps(l->offset));
    __m512 sc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      sc[j] = _mm512_mul_ps(dw, _mm512_loadu_ps(mm->act.d32 + t * (kp / 32) + b));
      corr[j] = _mm512_fmadd_ps(mw, _mm512_loadu_ps(mm->act.s32 + t * (kp / 32) + b), corr[j]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      const __m512i u =
          _mm512_inserti64x4(_mm512_castsi256_si512(block_values(blk + 2 * k * l->block, l)),
                             block_values(blk + (2 * k + 1) * l->block, l), 1);
      const __m512i idx = nk_pair_index(k);
#pragma GCC unroll 4
      for (int j = 0; j < nt; j++) {
        const int8_t *xq = mm->act.q + (t0 + j) * kp + (b + 2 * k) * 32;
        const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xq));
        acc[j][k & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(idx, sc[j]),
                                        acc[j][k & 1]);
      }
    }
  }
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * l->block;
    const float d = nk_f16_at(blk);
    const float m = l->min >= 0 ? nk_f16_at(blk + l->min) : d * l->offset;
    const __m256i u = block_values(blk, l);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const __m256i x = _mm256_loadu_si256((const __m256i *)(mm->act.q + t * kp + b * 32));
      const __m256i dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
      const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(dp), _mm256_extracti128_si256(dp, 1));
      const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      const int32_t isum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xB1)));
      tail[j] +=
          d * mm->act.d32[t * (kp / 32) + b] * (float)isum + m * mm->act.s32[t * (kp / 32) + b];
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    mm->y[(t0 + j) * mm->rows + r] =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), corr[j])) + tail[j];
  }
}

#define LEGACY_ROWS(layout)                              \
  for (int64_t r = r0; r < r1; r++) {                    \
    nk_prefetch_row(mm, r);                 \
    switch (nt) {                                        \
      case 1: legacy_row(mm, r, t0, 1, &layout); break;  \
      case 2: legacy_row(mm, r, t0, 2, &layout); break;  \
      case 3: legacy_row(mm, r, t0, 3, &layout); break;  \
      default: legacy_row(mm, r, t0, 4, &layout); break; \
    }                                                    \
  }

int nk_qdot_legacy_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  switch (mm->type) {
    case NK_Q4_0: LEGACY_ROWS(Q4_0) return 1;
    case NK_Q4_1: LEGACY_ROWS(Q4_1) return 1;
    case NK_Q5_0: LEGACY_ROWS(Q5_0) return 1;
    case NK_Q5_1: LEGACY_ROWS(Q5_1) return 1;
    default: return 0;
  }
}
