/*
 * AVX-512 mat-vec kernels fused for the types that dominate decode (Q8_0, Q4_K, Q6_K):
 * weights go from the GGUF block straight into registers, without the chunk round trip
 * through L1, so a core keeps up with its share of memory bandwidth. Same arithmetic as
 * the generic path: unsigned weight bytes (offset folded into a per-block correction)
 * times int8 activations by VPDPBUSD, scaled per block in f32. The same unpacking feeds
 * the panel packer (kern_avx512.c).
 */
#include "isa_common.h"
#include "kern_avx512.h"

/* Lanes 4i..4i+3 take element 4k + i. */
static inline __m512i quad_index(int k) {
  return _mm512_set_epi32(4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 2, 4 * k + 2,
                          4 * k + 2, 4 * k + 2, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k,
                          4 * k, 4 * k, 4 * k);
}

/* Q8_0: sum_b d_b * (dx_b * sum((q + 128) * x) - 128 * s_b), s_b = dx_b * sum(x); up to
 * NK_ROW_TOKENS_WIDE tokens. */
static inline __attribute__((always_inline)) void q8_0_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  const int64_t kp = mm->kp, nb = mm->cols / 32;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  const __m512i offsets =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(34));
  __m512 acc[NK_ROW_TOKENS_WIDE][2], corr[NK_ROW_TOKENS_WIDE];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc[j][0] = acc[j][1] = corr[j] = _mm512_setzero_ps();
  float tail[NK_ROW_TOKENS_WIDE] = {0};
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const uint8_t *blk = row + b * 34;
    nk_prefetch_ahead(mm, blk, 16 * 34);
    const __m512i dbits = _mm512_i32gather_epi32(offsets, blk, 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dbits));
    __m512 sc[NK_ROW_TOKENS_WIDE];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      sc[j] = _mm512_mul_ps(dw, _mm512_loadu_ps(mm->act.d32 + t * (kp / 32) + b));
      corr[j] = _mm512_fmadd_ps(dw, _mm512_loadu_ps(mm->act.s32 + t * (kp / 32) + b), corr[j]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
      const __m256i q0 = _mm256_loadu_si256((const __m256i *)(blk + 68 * k + 2));
      const __m256i q1 = _mm256_loadu_si256((const __m256i *)(blk + 68 * k + 36));
      const __m512i u =
          _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1), flip);
      const __m512i idx = nk_pair_index(k);
      /* Two sums per token hide the multiply-add latency; from five tokens on, the tokens
       * do, and registers are short. */
      const int odd = nt <= NK_ROW_TOKENS ? k & 1 : 0;
#pragma GCC unroll 8
      for (int j = 0; j < nt; j++) {
        const int8_t *xq = mm->act.q + (t0 + j) * kp + (b + 2 * k) * 32;
        const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xq));
        acc[j][odd] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(idx, sc[j]),
                                      acc[j][odd]);
      }
    }
  }
  for (; b < nb; b++) {
    const uint8_t *blk = row + b * 34;
    const float d = nk_f16_at(blk);
    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)),
                                       _mm256_set1_epi8((char)0x80));
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const __m256i x = _mm256_loadu_si256((const __m256i *)(mm->act.q + t * kp + b * 32));
      const __m256i dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
      const __m256i s = _mm256_add_epi32(dp, _mm256_permute2x128_si256(dp, dp, 1));
      const __m128i s4 = _mm256_castsi256_si128(s);
      const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      const int32_t isum = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xB1)));
      tail[j] += d * (mm->act.d32[t * (kp / 32) + b] * (float)isum -
                      128.0f * mm->act.s32[t * (kp / 32) + b]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1])) -
                                     128.0f * _mm512_reduce_add_ps(corr[j]) + tail[j];
  }
}

/* Q4_K / Q5_K's twelve scale bytes as sixteen: scales 0-7 then mins 0-7 (see
 * nk_k4_scale_min). Reads 16 bytes; the last four are ignored. */
static inline __m128i k4_scales_mins(const uint8_t *p) {
  const __m128i raw = _mm_loadu_si128((const __m128i *)p);
  const __m128i a =
      _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i b =
      _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7));
  const __m128i top = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
  const __m128i low6 = _mm_and_si128(a, _mm_set1_epi8(0x3F));
  const __m128i lo4 = _mm_or_si128(_mm_and_si128(a, _mm_set1_epi8(0x0F)), top);
  const __m128i hi4 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), _mm_set1_epi8(0x0F)), top);
  return _mm_blend_epi32(_mm_blend_epi32(low6, lo4, 0x2), hi4, 0x8);
}

/* Q4_K / Q5_K: eight sub-blocks of 32 with 6-bit scale and min; qs byte l of each 32-byte
 * run holds sub-block 2j in its low nibble and 2j + 1 in its high nibble (Q5_K: bit 4 in
 * qh). */
static inline __attribute__((always_inline)) void q45_k_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                            const int nt, const int five) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[4][2];
  __m256 macc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    acc[j][0] = acc[j][1] = _mm512_setzero_ps();
    macc[j] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = row + i * (five ? 176 : 144);
    nk_prefetch_ahead(mm, blk, five ? 176 : 144);
    const float d = nk_f16_at(blk), dmin = nk_f16_at(blk + 2);
    const __m128i packed = k4_scales_mins(blk + 4);
    const __m256 scd =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(packed)), _mm256_set1_ps(d));
    const __m256 md = _mm256_mul_ps(
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8))), _mm256_set1_ps(dmin));
    const uint8_t *qs = blk + (five ? 48 : 16);
    const __m512i z0 = _mm512_loadu_si512(qs), z1 = _mm512_loadu_si512(qs + 64);
    __m512i lo0 = _mm512_and_si512(z0, low4),
            hi0 = _mm512_and_si512(_mm512_srli_epi16(z0, 4), low4);
    __m512i lo1 = _mm512_and_si512(z1, low4),
            hi1 = _mm512_and_si512(_mm512_srli_epi16(z1, 4), low4);
    if (five) {
      /* Bit 4 of sub-block s's value l is bit s of qh[l]. */
      const __m256i h = _mm256_loadu_si256((const __m256i *)(blk + 16));
      const __m512i h02 = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
      const __m512i h46 = _mm512_srli_epi16(h02, 4);
      const __m512i bit4 = _mm512_set1_epi8(0x10);
      lo0 = _mm512_or_si512(lo0, _mm512_and_si512(_mm512_slli_epi16(h02, 4), bit4));
      hi0 = _mm512_or_si512(hi0, _mm512_and_si512(_mm512_slli_epi16(h02, 3), bit4));
      lo1 = _mm512_or_si512(lo1, _mm512_and_si512(_mm512_slli_epi16(h46, 4), bit4));
      hi1 = _mm512_or_si512(hi1, _mm512_and_si512(_mm512_slli_epi16(h46, 3), bit4));
    }
    __m512i w[4];
    w[0] = _mm512_shuffle_i64x2(lo0, hi0, 0x44);
    w[1] = _mm512_shuffle_i64x2(lo0, hi0, 0xEE);
    w[2] = _mm512_shuffle_i64x2(lo1, hi1, 0x44);
    w[3] = _mm512_shuffle_i64x2(lo1, hi1, 0xEE);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const int8_t *xq = mm->act.q + t * kp + i * 256;
      const __m256 sx = _mm256_mul_ps(scd, _mm256_loadu_ps(mm->act.d32 + t * (kp / 32) + 8 * i));
      const __m512 sxz = _mm512_castps256_ps512(sx);
      macc[j] = _mm256_fmadd_ps(md, _mm256_loadu_ps(mm->act.s32 + t * (kp / 32) + 8 * i), macc[j]);
#pragma GCC unroll 4
      for (int p = 0; p < 4; p++) {
        const __m512i dp =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p], _mm512_loadu_si512(xq + 64 * p));
        acc[j][p & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp),
                                        _mm512_permutexvar_ps(nk_pair_index(p), sxz), acc[j][p & 1]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    const __m128 m4 =
        _mm_add_ps(_mm256_castps256_ps128(macc[j]), _mm256_extractf128_ps(macc[j], 1));
    const __m128 m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
    const float mins = _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)));
    mm->y[(t0 + j) * mm->rows + r] =
        _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1])) - mins;
  }
}

/* Q6_K: sixteen groups of 16 with int8 scales; 6-bit values from ql nibbles and qh pairs,
 * biased by 32 (folded into a correction like Q8_0's). */
static inline __attribute__((always_inline)) void q6_k_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512 acc[4][2], corr[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j][0] = acc[j][1] = corr[j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = row + i * 210;
    nk_prefetch_ahead(mm, blk, 210);
    const __m512 scf = _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))),
        _mm512_set1_ps(nk_f16_at(blk + 208)));
    __m512i w[4];
    nk_q6_k_values(blk, w);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const int8_t *xq = mm->act.q + t * kp + i * 256;
      const __m512 sx = _mm512_mul_ps(scf, _mm512_loadu_ps(mm->act.d16 + t * (kp / 16) + 16 * i));
      corr[j] =
          _mm512_fmadd_ps(scf, _mm512_loadu_ps(mm->act.s16 + t * (kp / 16) + 16 * i), corr[j]);
#pragma GCC unroll 4
      for (int p = 0; p < 4; p++) {
        const __m512i dp =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[p], _mm512_loadu_si512(xq + 64 * p));
        acc[j][p & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp),
                                        _mm512_permutexvar_ps(quad_index(p), sx), acc[j][p & 1]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][0], acc[j][1])) -
                                     32.0f * _mm512_reduce_add_ps(corr[j]);
  }
}

/* Q4_K at 256 bits: qs byte l of 32-byte run j holds sub-block 2j (low nibble) and 2j + 1
 * (high nibble), so one run gives two sub-blocks of 32 with no shuffle, and each
 * VPDPBUSD result has a single scale. The per-sub-block scales (weight x activation) go
 * through a small array so that the multiply-adds take them as broadcast memory operands
 * (load ports) instead of shuffles. 256-bit operations also run on a third port. */
static inline __attribute__((always_inline)) void q4_k_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  const int64_t kp = mm->kp, nsb = mm->cols / 256;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  /* Independent sums per token: enough of them that the multiply-add latency hides. */
  enum { NA = 8 };
  const int na = nt == 1 ? 8 : nt == 2 ? 4 : 2;
  _Alignas(32) float sx[4][8];
  __m256 acc[4][NA], macc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    macc[j] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int k = 0; k < na; k++) acc[j][k] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nsb; i++) {
    const uint8_t *blk = row + i * 144;
    nk_prefetch_ahead(mm, blk, 144);
    const __m128i packed = k4_scales_mins(blk + 4);
    const __m256 scd =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(packed)), _mm256_set1_ps(nk_f16_at(blk)));
    const __m256 md = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8))),
                                    _mm256_set1_ps(nk_f16_at(blk + 2)));
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      _mm256_store_ps(sx[j], _mm256_mul_ps(scd, _mm256_loadu_ps(mm->act.d32 + t * (kp / 32) + 8 * i)));
      macc[j] = _mm256_fmadd_ps(md, _mm256_loadu_ps(mm->act.s32 + t * (kp / 32) + 8 * i), macc[j]);
    }
    /* Keeps sx in memory: gcc would otherwise broadcast its lanes with shuffles. */
    __asm__ volatile("" : : "m"(sx) : "memory");
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
      const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * q));
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 4
      for (int j = 0; j < nt; j++) {
        const int8_t *xq = mm->act.q + (t0 + j) * kp + i * 256 + 64 * q;
        const __m256i dl = _mm256_dpbusd_epi32(_mm256_setzero_si256(), lo,
                                               _mm256_loadu_si256((const __m256i *)xq));
        const __m256i dh = _mm256_dpbusd_epi32(_mm256_setzero_si256(), hi,
                                               _mm256_loadu_si256((const __m256i *)(xq + 32)));
        const int k0 = (2 * q) % na, k1 = (2 * q + 1) % na;
        acc[j][k0] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(dl), _mm256_broadcast_ss(&sx[j][2 * q]), acc[j][k0]);
        acc[j][k1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dh), _mm256_broadcast_ss(&sx[j][2 * q + 1]),
                                     acc[j][k1]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
#pragma GCC unroll 8
    for (int k = 2; k < na; k++) acc[j][k & 1] = _mm256_add_ps(acc[j][k & 1], acc[j][k]);
    const __m256 v8 = _mm256_sub_ps(_mm256_add_ps(acc[j][0], acc[j][1]), macc[j]);
    const __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
    const __m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
    mm->y[(t0 + j) * mm->rows + r] = _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
  }
}

static inline __attribute__((always_inline)) void q5_k_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  q45_k_row(mm, r, t0, nt, 1);
}

/* Chunk ch of a row in the chunk form (nk_internal.h) by the register arithmetic above, for
 * the panel packer: the generic nk_unpack's loops and scalar scale decoding cost more than
 * the mat-mat product they feed at a few dozen tokens. 0 for other types and for a partial
 * Q8_0 chunk (the generic unpack then runs). */
int nk_unpack_fused_avx512(const nk_mm *mm, const uint8_t *row, int64_t ch, nk_chunk *c) {
  const __m512i pairs = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  switch (mm->type) {
    case NK_Q4_K: {
      const uint8_t *blk = row + ch * 144;
      const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 2
      for (int n = 0; n < 2; n++) {
        const __m512i z = _mm512_loadu_si512(blk + 16 + 64 * n);
        const __m512i lo = _mm512_and_si512(z, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), low4);
        _mm512_store_si512(c->u + 128 * n, _mm512_shuffle_i64x2(lo, hi, 0x44));
        _mm512_store_si512(c->u + 128 * n + 64, _mm512_shuffle_i64x2(lo, hi, 0xEE));
      }
      const __m512i sm = _mm512_cvtepu8_epi32(k4_scales_mins(blk + 4));
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(pairs, sm));
      const __m512 mn = _mm512_cvtepi32_ps(
          _mm512_permutexvar_epi32(_mm512_add_epi32(pairs, _mm512_set1_epi32(8)), sm));
      _mm512_store_ps(c->s, _mm512_mul_ps(_mm512_set1_ps(nk_f16_at(blk)), sc));
      _mm512_store_ps(c->m, _mm512_mul_ps(_mm512_set1_ps(-nk_f16_at(blk + 2)), mn));
      return 1;
    }
    case NK_Q6_K: {
      const uint8_t *blk = row + ch * 210;
      __m512i w[4];
      nk_q6_k_values(blk, w);
      for (int p = 0; p < 4; p++) _mm512_store_si512(c->u + 64 * p, w[p]);
      const __m512 s = _mm512_mul_ps(
          _mm512_set1_ps(nk_f16_at(blk + 208)),
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))));
      _mm512_store_ps(c->s, s);
      _mm512_store_ps(c->m, _mm512_mul_ps(_mm512_set1_ps(-32.0f), s));
      return 1;
    }
    case NK_Q8_0: {
      if ((ch + 1) * NK_CHUNK > mm->cols) return 0;
      const uint8_t *blk = row + ch * 8 * 34;
      __m128i d = _mm_setzero_si128();
#pragma GCC unroll 8
      for (int j = 0; j < 8; j++) {
        uint16_t h;
        memcpy(&h, blk + 34 * j, 2);
        d = _mm_insert_epi16(d, h, j);
        _mm256_store_si256((__m256i *)(c->u + 32 * j),
                           _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 34 * j + 2)),
                                            _mm256_set1_epi8((char)0x80)));
      }
      const __m512 s = _mm512_permutexvar_ps(pairs, _mm512_castps256_ps512(_mm256_cvtph_ps(d)));
      _mm512_store_ps(c->s, s);
      _mm512_store_ps(c->m, _mm512_mul_ps(_mm512_set1_ps(-128.0f), s));
      return 1;
    }
    default: return 0;
  }
}

#define FUSED_ROWS(fn)                  \
  for (int64_t r = r0; r < r1; r++) {   \
    switch (nt) {                       \
      case 1: fn(mm, r, t0, 1); break;  \
      case 2: fn(mm, r, t0, 2); break;  \
      case 3: fn(mm, r, t0, 3); break;  \
      default: fn(mm, r, t0, 4); break; \
    }                                   \
  }

#define FUSED_ROWS_WIDE(fn)             \
  for (int64_t r = r0; r < r1; r++) {   \
    switch (nt) {                       \
      case 1: fn(mm, r, t0, 1); break;  \
      case 2: fn(mm, r, t0, 2); break;  \
      case 3: fn(mm, r, t0, 3); break;  \
      case 4: fn(mm, r, t0, 4); break;  \
      case 5: fn(mm, r, t0, 5); break;  \
      case 6: fn(mm, r, t0, 6); break;  \
      case 7: fn(mm, r, t0, 7); break;  \
      default: fn(mm, r, t0, 8); break; \
    }                                   \
  }

int nk_qdot_fused_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  switch (mm->type) {
    case NK_Q8_0: FUSED_ROWS_WIDE(q8_0_row) return 1;
    case NK_Q4_K: FUSED_ROWS(q4_k_row) return 1;
    case NK_Q5_K: FUSED_ROWS(q5_k_row) return 1;
    case NK_Q6_K: FUSED_ROWS(q6_k_row) return 1;
    default: return 0;
  }
}
