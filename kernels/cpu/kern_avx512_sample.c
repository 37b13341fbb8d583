/*
 * The passes of sample.c over a whole row, in AVX-512: a draw's candidates sixteen values
 * at a time (compare in double, compress the ids and logits that pass, their exponentials
 * eight at a time, lane for lane the operations of sample.c's exp_neg, the table by a
 * gather), the span and buckets of top-k/top-p's first round, the best logit, and the sum
 * of exponentials of log-probs. fp-contract is off, so no multiply and add fuse into one
 * rounding: everything comes out bit for bit as the scalar code's, and the draws token for
 * token (native_sampling_test).
 */
#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>
#include <math.h>

#include "sample.h"

/* The lanes of a 16- (8-) value step with `left` values left in the row. */
static inline __mmask16 tail16(int64_t left) {
  return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
}

static inline __mmask8 tail8(int64_t left) {
  return left >= 8 ? 0xFF : (__mmask8)((1u << left) - 1);
}

/* exp_neg of sample.c for eight values of s >= 0. */
static __m512d exp_neg8(const double *table, __m512d s) {
  const __mmask8 live = _mm512_cmp_pd_mask(s, _mm512_set1_pd(NK_EXP_RANGE), _CMP_LT_OQ);
  const __m512d y = _mm512_mul_pd(s, _mm512_set1_pd(NK_EXP_STEPS));
  const __m512i t = _mm512_cvttpd_epi64(y);
  const __mmask8 up = _mm512_cmp_pd_mask(_mm512_cvtepi64_pd(t), y, _CMP_LT_OQ);
  const __m512i k = _mm512_mask_add_epi64(t, up, t, _mm512_set1_epi64(1));
  const __m512d r = _mm512_div_pd(_mm512_sub_pd(_mm512_cvtepi64_pd(k), y),
                                  _mm512_set1_pd(NK_EXP_STEPS));
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d p = _mm512_add_pd(_mm512_set1_pd(0.5), _mm512_mul_pd(r, _mm512_set1_pd(1.0 / 6.0)));
  p = _mm512_add_pd(one, _mm512_mul_pd(r, p));
  p = _mm512_add_pd(one, _mm512_mul_pd(r, p));
  const __m512d e = _mm512_mask_i64gather_pd(_mm512_setzero_pd(), live, k, table, 8);
  return _mm512_maskz_mul_pd(live, e, p);
}

int64_t nk_sample_candidates_avx512(const float *x, int64_t n, double floor_at, double max,
                                    double inverse, const double *table, int32_t *ids,
                                    float *logits, double *weights) {
  const __m512d lo = _mm512_set1_pd(floor_at), top = _mm512_set1_pd(max),
                inv = _mm512_set1_pd(inverse);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i at = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += 16, at = _mm512_add_epi32(at, step)) {
    const __mmask16 in = tail16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(in, x + i);
    const __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    /* Ordered: NaN fails. */
    const __mmask8 k0 = _mm512_mask_cmp_pd_mask((__mmask8)in, d0, lo, _CMP_GE_OQ);
    const __mmask8 k1 = _mm512_mask_cmp_pd_mask((__mmask8)(in >> 8), d1, lo, _CMP_GE_OQ);
    const __mmask16 keep = (__mmask16)(k0 | (k1 << 8));
    if (keep == 0) continue;
    _mm512_mask_compressstoreu_epi32(ids + count, keep, at);
    _mm512_mask_compressstoreu_ps(logits + count, keep, v);
    if (weights) {
      const __m512d w0 = exp_neg8(table, _mm512_mul_pd(_mm512_sub_pd(top, d0), inv));
      const __m512d w1 = exp_neg8(table, _mm512_mul_pd(_mm512_sub_pd(top, d1), inv));
      _mm512_mask_compressstoreu_pd(weights + count, k0, w0);
      _mm512_mask_compressstoreu_pd(weights + count + __builtin_popcount(k0), k1, w1);
    }
    count += __builtin_popcount(keep);
  }
  return count;
}

void nk_sample_span_avx512(const float *x, int64_t n, double *hi, double *lo) {
  __m512 top = _mm512_set1_ps(-INFINITY), bottom = _mm512_set1_ps(INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = tail16(n - i);
    top = _mm512_mask_max_ps(top, in, top, _mm512_maskz_loadu_ps(in, x + i));
    bottom = _mm512_mask_min_ps(bottom, in, bottom, _mm512_maskz_loadu_ps(in, x + i));
  }
  *hi = _mm512_reduce_max_ps(top);
  *lo = _mm512_reduce_min_ps(bottom);
}

void nk_sample_buckets_avx512(const float *x, int64_t n, double hi, double scale, int32_t last,
                              uint16_t *bucket_of) {
  const __m512d top = _mm512_set1_pd(hi), sc = _mm512_set1_pd(scale);
  const __m256i cap = _mm256_set1_epi32(last);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 in = tail8(n - i);
    const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(in, x + i));
    /* Not negative: truncation floors. */
    const __m256i b = _mm512_cvttpd_epi32(_mm512_mul_pd(_mm512_sub_pd(top, v), sc));
    _mm_mask_storeu_epi16(bucket_of + i, in, _mm256_cvtepi32_epi16(_mm256_min_epi32(b, cap)));
  }
}

double nk_sample_max_avx512(const float *x, int64_t n, float from) {
  /* MAXPS answers its second operand where either is NaN: NaN values never win. A zero's
   * sign may differ from a scalar scan's pick; no weight or floor sees the difference. */
  __m512 best = _mm512_set1_ps(from);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = tail16(n - i);
    best = _mm512_max_ps(_mm512_mask_loadu_ps(best, in, x + i), best);
  }
  return _mm512_reduce_max_ps(best);
}

double nk_sample_exp_sum_avx512(const float *x, int64_t n, double max, const double *table) {
  /* Lane l of the four-lane sum takes elements 4m + l in order, as sum4 does: eight
   * weights go in as their low four, then their high four. The tail's missing lanes add
   * +0.0, which changes no sum of weights. */
  __m256d sum = _mm256_setzero_pd();
  const __m512d top = _mm512_set1_pd(max);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 in = tail8(n - i);
    const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(in, x + i));
    const __m512d w = _mm512_maskz_mov_pd(in, exp_neg8(table, _mm512_sub_pd(top, v)));
    sum = _mm256_add_pd(sum, _mm512_castpd512_pd256(w));
    sum = _mm256_add_pd(sum, _mm512_extractf64x4_pd(w, 1));
  }
  double lane[4];
  _mm256_storeu_pd(lane, sum);
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}
