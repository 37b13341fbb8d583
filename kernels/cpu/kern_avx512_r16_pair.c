/*
 * Repacked Q4_K two groups (32 rows) a tile, for products of many tokens
 * (nk_r16_rows_avx512 sends them here from NK_R16_PAIR_MIN tokens on).
 */
#include "kern_avx512_r16.h"

/* q4_k_tile_int over two groups at once (g and g + 1, 32 rows) for nt <= 4 tokens: a
 * token's broadcast activations meet both groups' weights from a register, where one
 * group took a broadcast from memory per VPDPBUSD, and the loads, not the multiply-adds,
 * set the pace. The mins' sums are taken once a super-block, after the runs. */
static inline __attribute__((always_inline)) void q4_k_pair_int(const nk_mm *mm, int64_t g,
                                                                int64_t t0, const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *grp[2] = {mm->w + g * 16 * mm->row_bytes, mm->w + (g + 1) * 16 * mm->row_bytes};
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const int prefetch = t0 == 0;
  const int64_t group_bytes = 16 * mm->row_bytes;
  __m512 acc[2][4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[0][j] = acc[1][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk[2] = {grp[0] + i * NK_R16_Q4_K_BLOCK, grp[1] + i * NK_R16_Q4_K_BLOCK};
    __m512i isum[2][4];
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) isum[0][j] = isum[1][j] = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++) {
      if (prefetch) {
        /* Each group's own stream: past its group's end, the same group of the next pair
         * (a group further on), not the other group's bytes, already being read. */
        const int64_t o = i * NK_R16_Q4_K_BLOCK + NK_R16_Q4_K_BLOCK / 4 * q;
        const int64_t skip = o + mm->line_ahead >= group_bytes ? group_bytes : 0;
        nk_prefetch_ahead(mm, blk[0] + NK_R16_Q4_K_BLOCK / 4 * q + skip, NK_R16_Q4_K_BLOCK / 4);
        nk_prefetch_ahead(mm, blk[1] + NK_R16_Q4_K_BLOCK / 4 * q + skip, NK_R16_Q4_K_BLOCK / 4);
      }
      __m512i lo[2][4], hi[2][4];
#pragma GCC unroll 4
      for (int j = 0; j < nt; j++) {
        lo[0][j] = hi[0][j] = lo[1][j] = hi[1][j] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int k = 0; k < 8; k++) {
        const __m512i v0 = q4_bytes(blk[0] + NK_R16_Q4_K_QS + 512 * q + 64 * k, nt);
        const __m512i v1 = q4_bytes(blk[1] + NK_R16_Q4_K_QS + 512 * q + 64 * k, nt);
        const __m512i wl0 = _mm512_and_si512(v0, low4), wh0 = q4_high16(v0);
        const __m512i wl1 = _mm512_and_si512(v1, low4), wh1 = q4_high16(v1);
#pragma GCC unroll 4
        for (int j = 0; j < nt; j++) {
          const int8_t *xq = mm->act.q + (t0 + j) * kp + 256 * i + 64 * q + 4 * k;
          const __m512i xl = _mm512_set1_epi32(*(const act_quad *)xq);
          const __m512i xh = _mm512_set1_epi32(*(const act_quad *)(xq + 32));
          lo[0][j] = _mm512_dpbusd_epi32(lo[0][j], wl0, xl);
          hi[0][j] = _mm512_dpbusd_epi32(hi[0][j], wh0, xh);
          lo[1][j] = _mm512_dpbusd_epi32(lo[1][j], wl1, xl);
          hi[1][j] = _mm512_dpbusd_epi32(hi[1][j], wh1, xh);
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        const __m512i sc0 = q4_low_scales16(blk[h] + NK_R16_Q4_K_SCALES + 32 * q),
                      sc1 = k4_bytes16(blk[h] + NK_R16_Q4_K_SCALES + 16 + 32 * q);
#pragma GCC unroll 4
        for (int j = 0; j < nt; j++) {
          isum[h][j] = _mm512_add_epi32(isum[h][j], _mm512_mullo_epi32(lo[h][j], sc0));
          isum[h][j] = _mm512_add_epi32(isum[h][j], _mm512_mullo_epi32(hi[h][j], sc1));
        }
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m512i mins[4];
      q4_k_min_pairs(blk[h], mins);
      const __m512 d16 = q4_over16(q4_d(blk[h]));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk[h] + NK_R16_Q4_K_DMIN)));
#pragma GCC unroll 4
      for (int j = 0; j < nt; j++) {
        const __m512i msum = bsum_dot(mins, mm->act.bsum32 + (t0 + j) * (kp / 32) + 8 * i, 4);
        const __m512 dk = _mm512_set1_ps(mm->act.dk[(t0 + j) * (kp / 256) + i]);
        acc[h][j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[h][j]), _mm512_mul_ps(d16, dk), acc[h][j]);
        acc[h][j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dk), acc[h][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    store16(mm, g, t0 + j, acc[0][j]);
    store16(mm, g + 1, t0 + j, acc[1][j]);
  }
}

#define CASE(tile, t) \
  case t: tile(mm, g, t0, t); break;

static void q4_k_pairs(const nk_mm *mm, int64_t g, int64_t t0, int nt) {
  switch (nt) {
    CASE(q4_k_pair_int, 1) CASE(q4_k_pair_int, 2) CASE(q4_k_pair_int, 3) CASE(q4_k_pair_int, 4)
    default: break;
  }
}

int64_t nk_r16_q4_k_pairs_avx512(const nk_mm *mm, int64_t r0, int64_t r1) {
  const int64_t n = mm->n_tokens, per = tile_tokens(n, 4);
  int64_t g = r0 / 16;
  for (; g + 1 < r1 / 16; g += 2) {
    for (int64_t t0 = 0; t0 < n; t0 += per) {
      q4_k_pairs(mm, g, t0, (int)(n - t0 < per ? n - t0 : per));
    }
  }
  return 16 * g;
}
