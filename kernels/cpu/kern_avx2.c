/*
 * AVX2 + FMA + F16C kernels: the AVX-512 design (kern_avx512.c) at 256 bits, with
 * VPMADDUBSW + VPMADDWD in place of VPDPBUSD. VPMADDUBSW saturates its 16-bit pair sums,
 * which only types whose unpacked bytes exceed 127 can reach (Q8_0, "wide"): those run on
 * signed bytes with the sign moved onto the activations (|w| * sign(x, w)).
 */
#include "isa_common.h"

#define QT 3 /* tokens per quantized mat-mat tile */
#define FT 6 /* tokens per float mat-mat tile */

static inline __m256i dot4(__m256i u, __m256i x, const int wide) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (wide)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(u), _mm256_sign_epi8(x, u)),
                             ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), ones);
}

static inline __attribute__((always_inline)) void qdot_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt, const int wide) {
  const int64_t kp = mm->kp, n_chunks = kp / NK_CHUNK;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  const __m256i flip = _mm256_set1_epi8((char)0x80);
  __m256i idx[4];
  for (int i = 0; i < 4; i++) {
    idx[i] =
        _mm256_set_epi32(2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i, 2 * i, 2 * i, 2 * i);
  }
  __m256 acc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j] = _mm256_setzero_ps();
  nk_chunk c;
  for (int64_t ch = 0; ch < n_chunks; ch++) {
    nk_unpack_avx2(mm->type, row, ch, mm->cols, &c);
    const __m256 s_lo = _mm256_load_ps(c.s), s_hi = _mm256_load_ps(c.s + 8);
    __m256 m_lo = _mm256_load_ps(c.m), m_hi = _mm256_load_ps(c.m + 8);
    if (wide) {
      m_lo = _mm256_fmadd_ps(s_lo, _mm256_set1_ps(128.0f), m_lo);
      m_hi = _mm256_fmadd_ps(s_hi, _mm256_set1_ps(128.0f), m_hi);
    }
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const int8_t *xq = mm->act.q + t * kp + ch * NK_CHUNK;
      const float *d16 = mm->act.d16 + t * (kp / 16) + ch * NK_GROUPS;
      const float *s16 = mm->act.s16 + t * (kp / 16) + ch * NK_GROUPS;
      acc[j] = _mm256_fmadd_ps(m_lo, _mm256_loadu_ps(s16), acc[j]);
      acc[j] = _mm256_fmadd_ps(m_hi, _mm256_loadu_ps(s16 + 8), acc[j]);
      const __m256 sx_lo = _mm256_mul_ps(s_lo, _mm256_loadu_ps(d16));
      const __m256 sx_hi = _mm256_mul_ps(s_hi, _mm256_loadu_ps(d16 + 8));
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        __m256i u = _mm256_load_si256((const __m256i *)(c.u + 32 * i));
        if (wide) u = _mm256_xor_si256(u, flip);
        const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 32 * i));
        const __m256 sc = _mm256_permutevar8x32_ps(i < 4 ? sx_lo : sx_hi, idx[i % 4]);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot4(u, x, wide)), sc, acc[j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    const __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
    const __m128 v2 = _mm_add_ps(v, _mm_movehl_ps(v, v));
    mm->y[(t0 + j) * mm->rows + r] = _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
  }
}

void nk_qdot_rows_avx2(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  const int wide = mm->tr->wide;
  for (int64_t r = r0; r < r1; r++) {
    nk_prefetch_row(mm, r);
    switch (nt + 4 * wide) {
      case 1: qdot_row(mm, r, t0, 1, 0); break;
      case 2: qdot_row(mm, r, t0, 2, 0); break;
      case 3: qdot_row(mm, r, t0, 3, 0); break;
      case 4: qdot_row(mm, r, t0, 4, 0); break;
      case 5: qdot_row(mm, r, t0, 1, 1); break;
      case 6: qdot_row(mm, r, t0, 2, 1); break;
      case 7: qdot_row(mm, r, t0, 3, 1); break;
      default: qdot_row(mm, r, t0, 4, 1); break;
    }
  }
}

static inline float hsum(__m256 a) {
  const __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 v2 = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(v2, _mm_movehdup_ps(v2)));
}

static inline __m256 load_w8(int32_t type, const uint8_t *row, int64_t k) {
  if (type == NK_F32) return _mm256_loadu_ps((const float *)row + k);
  const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
  if (type == NK_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) void fdot_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m256 acc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= mm->cols; k += 8) {
    const __m256 w = load_w8(mm->type, row, k);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(mm->x + (t0 + j) * mm->cols + k), acc[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    float sum = hsum(acc[j]);
    for (int64_t i = k; i < mm->cols; i++) {
      const float w = mm->type == NK_F32   ? ((const float *)row)[i]
                      : mm->type == NK_F16 ? nk_f16_to_f32_1(((const uint16_t *)row)[i])
                                           : nk_bf16_to_f32_1(((const uint16_t *)row)[i]);
      sum += w * mm->x[(t0 + j) * mm->cols + i];
    }
    mm->y[(t0 + j) * mm->rows + r] = sum;
  }
}

void nk_fdot_rows_avx2(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  for (int64_t r = r0; r < r1; r++) {
    nk_prefetch_row(mm, r);
    switch (nt) {
      case 1: fdot_row(mm, r, t0, 1); break;
      case 2: fdot_row(mm, r, t0, 2); break;
      case 3: fdot_row(mm, r, t0, 3); break;
      default: fdot_row(mm, r, t0, 4); break;
    }
  }
}

static inline void store_tile(const nk_mm *mm, int64_t r0, int64_t t, __m256 lo, __m256 hi) {
  float *y = mm->y + t * mm->rows + r0;
  const int64_t rem = mm->rows - r0;
  if (rem >= 16) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
  } else {
    float tmp[16];
    _mm256_storeu_ps(tmp, lo);
    _mm256_storeu_ps(tmp + 8, hi);
    memcpy(y, tmp, (size_t)rem * 4);
  }
}

static inline __attribute__((always_inline)) void qgemm_tile(const nk_mm *mm, int64_t r0,
                                                             const uint8_t *u, const float *s,
                                                             const float *m, int64_t t0,
                                                             const int nt, const int group,
                                                             const int wide) {
  const int64_t kp = mm->kp, n_groups = kp / group;
  const int8_t *xq[QT];
  const float *dx[QT], *xs[QT];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
    xq[j] = mm->act.q + (t0 + j) * kp;
    dx[j] = group == 16 ? mm->act.d16 + (t0 + j) * (kp / 16) : mm->act.d32 + (t0 + j) * (kp / 32);
    xs[j] = group == 16 ? mm->act.s16 + (t0 + j) * (kp / 16) : mm->act.s32 + (t0 + j) * (kp / 32);
  }
  __m256 acc0[QT], acc1[QT];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc0[j] = acc1[j] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_groups; g++) {
    __m256i ip0[QT], ip1[QT];
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) ip0[j] = ip1[j] = _mm256_setzero_si256();
    const uint8_t *ug = u + g * group * 16;
#pragma GCC unroll 8
    for (int k4 = 0; k4 < group / 4; k4++) {
      const __m256i w0 = _mm256_load_si256((const __m256i *)(ug + k4 * 64));
      const __m256i w1 = _mm256_load_si256((const __m256i *)(ug + k4 * 64 + 32));
#pragma GCC unroll 4
      for (int j = 0; j < nt; j++) {
        int32_t xv;
        memcpy(&xv, xq[j] + g * group + 4 * k4, 4);
        const __m256i xb = _mm256_set1_epi32(xv);
        ip0[j] = _mm256_add_epi32(ip0[j], dot4(w0, xb, wide));
        ip1[j] = _mm256_add_epi32(ip1[j], dot4(w1, xb, wide));
      }
    }
    const __m256 s0 = _mm256_load_ps(s + g * 16), s1 = _mm256_load_ps(s + g * 16 + 8);
    const __m256 m0 = _mm256_load_ps(m + g * 16), m1 = _mm256_load_ps(m + g * 16 + 8);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const __m256 d = _mm256_set1_ps(dx[j][g]), xsum = _mm256_set1_ps(xs[j][g]);
      acc0[j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ip0[j]), s0), d, acc0[j]);
      acc1[j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ip1[j]), s1), d, acc1[j]);
      acc0[j] = _mm256_fmadd_ps(m0, xsum, acc0[j]);
      acc1[j] = _mm256_fmadd_ps(m1, xsum, acc1[j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) store_tile(mm, r0, t0 + j, acc0[j], acc1[j]);
}

/* Wide types are packed as signed bytes (u - 128) with the offset moved into m. */
static void to_signed(const nk_mm *mm, uint8_t *u, float *s, float *m) {
  const int64_t n_groups = mm->kp / mm->tr->group;
  for (int64_t i = 0; i < mm->kp * 16; i++) u[i] ^= 0x80;
  for (int64_t i = 0; i < n_groups * 16; i++) m[i] += 128.0f * s[i];
}

void nk_qgemm_panel_avx2(const nk_mm *mm, int64_t r0, void *scratch) {
  const int32_t group = mm->tr->group, wide = mm->tr->wide;
  uint8_t *u = scratch;
  float *s = (float *)(u + mm->kp * 16);
  float *m = s + mm->kp / group * 16;
  nk_pack_qpanel_avx2(mm, r0, 16, u, s, m);
  if (wide) to_signed(mm, u, s, m);
  for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += QT) {
    const int64_t nt = mm->n_tokens - t0 < QT ? mm->n_tokens - t0 : QT;
    const int key = (int)nt * 4 + (group == 16 ? 0 : 2) + wide;
    switch (key) {
      case 4: qgemm_tile(mm, r0, u, s, m, t0, 1, 16, 0); break;
      case 5: qgemm_tile(mm, r0, u, s, m, t0, 1, 16, 1); break;
      case 6: qgemm_tile(mm, r0, u, s, m, t0, 1, 32, 0); break;
      case 7: qgemm_tile(mm, r0, u, s, m, t0, 1, 32, 1); break;
      case 8: qgemm_tile(mm, r0, u, s, m, t0, 2, 16, 0); break;
      case 9: qgemm_tile(mm, r0, u, s, m, t0, 2, 16, 1); break;
      case 10: qgemm_tile(mm, r0, u, s, m, t0, 2, 32, 0); break;
      case 11: qgemm_tile(mm, r0, u, s, m, t0, 2, 32, 1); break;
      case 12: qgemm_tile(mm, r0, u, s, m, t0, 3, 16, 0); break;
      case 13: qgemm_tile(mm, r0, u, s, m, t0, 3, 16, 1); break;
      case 14: qgemm_tile(mm, r0, u, s, m, t0, 3, 32, 0); break;
      default: qgemm_tile(mm, r0, u, s, m, t0, 3, 32, 1); break;
    }
  }
}

static inline __attribute__((always_inline)) void fgemm_tile(const nk_mm *mm, int64_t r0,
                                                             const float *w, int64_t t0,
                                                             const int nt) {
  __m256 acc0[FT], acc1[FT];
  const float *x[FT];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    acc0[j] = acc1[j] = _mm256_setzero_ps();
    x[j] = mm->x + (t0 + j) * mm->cols;
  }
  for (int64_t k = 0; k < mm->cols; k++) {
    const __m256 w0 = _mm256_load_ps(w + k * 16), w1 = _mm256_load_ps(w + k * 16 + 8);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const __m256 xb = _mm256_broadcast_ss(x[j] + k);
      acc0[j] = _mm256_fmadd_ps(w0, xb, acc0[j]);
      acc1[j] = _mm256_fmadd_ps(w1, xb, acc1[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store_tile(mm, r0, t0 + j, acc0[j], acc1[j]);
}

void nk_fgemm_panel_avx2(const nk_mm *mm, int64_t r0, void *scratch) {
  float *w = scratch;
  nk_pack_fpanel_avx2(mm, r0, 16, w);
  for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += FT) {
    switch (mm->n_tokens - t0 < FT ? mm->n_tokens - t0 : FT) {
      case 1: fgemm_tile(mm, r0, w, t0, 1); break;
      case 2: fgemm_tile(mm, r0, w, t0, 2); break;
      case 3: fgemm_tile(mm, r0, w, t0, 3); break;
      case 4: fgemm_tile(mm, r0, w, t0, 4); break;
      case 5: fgemm_tile(mm, r0, w, t0, 5); break;
      default: fgemm_tile(mm, r0, w, t0, FT); break;
    }
  }
}
