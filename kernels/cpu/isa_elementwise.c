/*
 * Row-wise and element-wise ops: RMSNorm, SiLU and GELU gates, add and NeoX RoPE. Plain loops with
 * explicit 16-wide partial sums so that each level's flags vectorize them without
 * reassociating anything.
 */
#include <math.h>

#include "isa_common.h"
#include "isa_exp.h"

void NK_FN(nk_rmsnorm_row)(float *out, const float *x, const float *w, int64_t dim, float eps) {
  float lanes[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    for (int l = 0; l < 16; l++) lanes[l] += x[i + l] * x[i + l];
  }
  double sum = 0.0;
  for (; i < dim; i++) sum += (double)(x[i] * x[i]);
  for (int l = 0; l < 16; l++) sum += (double)lanes[l];
  const float mean = (float)(sum / (double)dim);
  const float scale = 1.0f / sqrtf(mean + eps);
  if (w) {
    for (i = 0; i < dim; i++) out[i] = (x[i] * scale) * w[i];
  } else {
    for (i = 0; i < dim; i++) out[i] = x[i] * scale;
  }
}

void NK_FN(nk_silu_mul)(float *out, const float *gate, const float *up, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = nk_exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_storeu_ps(out + i,
                     _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = nk_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; i++) {
    const float g = gate[i];
    out[i] = g / (1.0f + nk_expf(-g)) * up[i];
  }
}

/* gelu(x) = 0.5 x (1 + tanh(y)) = x / (1 + exp(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3):
 * the tanh approximation ggml's gelu computes, in the form of silu_mul's sigmoid. */
#define GELU_K2 1.5957691216057308f /* 2 sqrt(2/pi) */
#define GELU_C 0.044715f

void NK_FN(nk_gelu_mul)(float *out, const float *gate, const float *up, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f), k2 = _mm512_set1_ps(-GELU_K2);
  const __m512 c = _mm512_set1_ps(GELU_C);
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    const __m512 e = nk_exp16(_mm512_mul_ps(k2, _mm512_fmadd_ps(c, g3, g)));
    _mm512_storeu_ps(out + i,
                     _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 one = _mm256_set1_ps(1.0f), k2 = _mm256_set1_ps(-GELU_K2);
  const __m256 c = _mm256_set1_ps(GELU_C);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 e = nk_exp8(_mm256_mul_ps(k2, _mm256_fmadd_ps(c, g3, g)));
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; i++) {
    const float g = gate[i];
    out[i] = g / (1.0f + nk_expf(-GELU_K2 * (g + GELU_C * g * g * g))) * up[i];
  }
}

void NK_FN(nk_add)(float *out, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* Rotates each head's pairs (i, i + head_dim / 2) by the angles whose cosines and sines
 * `cs` holds (rope.c). */
void NK_FN(nk_rope_apply)(float *x, int64_t n_heads, int64_t head_dim, const float *cs) {
  const int64_t half = head_dim / 2;
  const float *cos_t = cs, *sin_t = cs + half;
  for (int64_t h = 0; h < n_heads; h++) {
    float *v = x + h * head_dim;
    for (int64_t i = 0; i < half; i++) {
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * cos_t[i] - x1 * sin_t[i];
      v[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

void NK_FN(nk_f16_store)(uint16_t *dst, const float *src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128((__m128i *)(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; i++) dst[i] = nk_f32_to_f16_1(src[i]);
}
