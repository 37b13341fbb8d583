/*
 * Sources named isa_*.c are compiled once per dispatch level with that level's target
 * flags and NK_ISA_NAME set to scalar, avx2 or avx512; NK_FN(name) gives each copy its own
 * symbols. kern_<level>.c holds the hand-written kernels of one level; avx512vbmi has
 * only those (kern_avx512vbmi.c) and takes the rest from avx512.
 */
#ifndef NK_ISA_COMMON_H
#define NK_ISA_COMMON_H

#include <immintrin.h>

#include "nk_internal.h"

#ifndef NK_ISA_NAME
#error "NK_ISA_NAME must be defined by the build"
#endif

#define NK_CAT2(a, b) a##_##b
#define NK_CAT(a, b) NK_CAT2(a, b)
#define NK_FN(name) NK_CAT(name, NK_ISA_NAME)

/* Packed panel layouts, shared by the packers (isa_pack.c) and the panel kernels:
 * quantized: u[kp/4][panel_rows][4] bytes, then s[kp/group][panel_rows] and
 * m[kp/group][panel_rows] floats (w = s * u + m per group of `group` columns);
 * float: w[cols][panel_rows] f32. Rows past the matrix are zero. */
void NK_FN(nk_pack_qpanel)(const nk_mm *mm, int64_t r0, int32_t panel_rows, uint8_t *u, float *s,
                           float *m);
void NK_FN(nk_pack_fpanel)(const nk_mm *mm, int64_t r0, int32_t panel_rows, float *w);

void NK_FN(nk_quantize_act)(const float *x, int64_t cols, int64_t kp, int8_t *q, float *d16,
                            float *s16, float *d32, float *s32);
void NK_FN(nk_quantize_act_k)(const float *x, int64_t cols, const nk_qact *act, int64_t t);
void NK_FN(nk_unpack)(int32_t type, const uint8_t *row, int64_t chunk, int64_t cols, nk_chunk *c);
void NK_FN(nk_qdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);
void NK_FN(nk_fdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt);
void NK_FN(nk_r16_rows)(const nk_mm *mm, int64_t r0, int64_t r1);
void NK_FN(nk_qgemm_panel)(const nk_mm *mm, int64_t r0, void *scratch);
void NK_FN(nk_fgemm_panel)(const nk_mm *mm, int64_t r0, void *scratch);
void NK_FN(nk_rmsnorm_row)(float *out, const float *x, const float *w, int64_t dim, float eps);
void NK_FN(nk_silu_mul)(float *out, const float *gate, const float *up, int64_t n);
void NK_FN(nk_gelu_mul)(float *out, const float *gate, const float *up, int64_t n);
void NK_FN(nk_add)(float *out, const float *a, const float *b, int64_t n);
void NK_FN(nk_rope_apply)(float *x, int64_t n_heads, int64_t head_dim, const float *cs);
void NK_FN(nk_hadamard_chunk)(float *x, int64_t n, float norm);
void NK_FN(nk_attend_item)(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh,
                           float *scratch);
void NK_FN(nk_attend_split)(const nk_attn *a, int64_t p_begin, int64_t p_end, float *scratch,
                            float *part);
/* f32 to f16, round to nearest even (the F16C conversion). */
void NK_FN(nk_f16_store)(uint16_t *dst, const float *src, int64_t n);
/* The largest non-NaN value of x[0, n) and its first index (n when every value is NaN). */
void NK_FN(nk_argmax_span)(const float *x, int64_t n, float *best, int64_t *at);
uint64_t NK_FN(nk_read_words)(const uint8_t *p, int64_t n, int32_t pattern);

/* Activation quantization's arithmetic, for every block size (32, and 256 for K-quants)
 * and level, so that they all compute the same ints: scale d = amax / 127, q = x / d
 * rounded half away from zero. */
static inline float nk_act_inverse(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

static inline int8_t nk_act_round(float x, float id) {
  const float v = x * id;
  return (int8_t)(int32_t)(v + (v >= 0.0f ? 0.5f : -0.5f));
}

#if defined(__AVX512F__)
/* nk_act_round on sixteen lanes, as int32. */
static inline __m512i nk_act_round16(__m512 x, __m512 id) {
  const __m512 v = _mm512_mul_ps(x, id), half = _mm512_set1_ps(0.5f);
  const __mmask16 ge = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ);
  return _mm512_cvttps_epi32(_mm512_add_ps(v, _mm512_mask_blend_ps(ge, -half, half)));
}

/* Lane j of the result is op over the sixteen lanes of p[j]: sixteen vectors' horizontal
 * sums (or maxima) by a transposition in three steps (45 operations instead of 16 chains of
 * reductions). */
#define NK_REDUCE16(name, op)                                                              \
  static inline __m512 name(const __m512 *p) {                                              \
    __m512 t[8], u[4];                                                                     \
    /* Per 128-bit lane: rows 2i, 2i + 1, 2i, 2i + 1. */                                   \
    for (int i = 0; i < 8; i++) {                                                          \
      t[i] = op(_mm512_unpacklo_ps(p[2 * i], p[2 * i + 1]),                                \
                _mm512_unpackhi_ps(p[2 * i], p[2 * i + 1]));                               \
    }                                                                                      \
    /* Per 128-bit lane: rows 4i .. 4i + 3. */                                             \
    for (int i = 0; i < 4; i++) {                                                          \
      const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);   \
      u[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),                                \
                _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));                               \
    }                                                                                      \
    /* Pairs of 128-bit lanes, then the other pairs: lane j ends with row j's result. */   \
    const __m512 v0 =                                                                      \
        op(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD)); \
    const __m512 v1 =                                                                      \
        op(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD)); \
    return op(_mm512_shuffle_f32x4(v0, v1, 0x88), _mm512_shuffle_f32x4(v0, v1, 0xDD));     \
  }
NK_REDUCE16(nk_sum16_ps, _mm512_add_ps)
NK_REDUCE16(nk_max16_ps, _mm512_max_ps)
#undef NK_REDUCE16
#endif

/* One f16 to f32 with this level's instructions. */
static inline float nk_f16(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return nk_f16_to_f32_1(h);
#endif
}

/* f16 / bf16 rows to f32 with this level's instructions. */
static inline void nk_f16_row(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  }
#endif
  for (; i < n; i++) dst[i] = nk_f16_to_f32_1(src[i]);
}

#endif
