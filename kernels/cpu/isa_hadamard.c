/*
 * The Walsh-Hadamard rotation of one chunk of n values (a power of two), in place, for
 * nk_hadamard (hadamard.c): the scale, then log2(n) rounds of butterflies (a + b, a - b)
 * with the strides from 1 up, ggml's order (ggml_compute_forward_fwht_f32), so that every
 * level computes the same bits. AVX-512 takes the strides below 16 inside a register (a
 * lane permute and a masked blend) and the rest between registers; other levels run the
 * plain rounds, which their flags vectorize from stride 4 or 8 on.
 */
#include "isa_common.h"

static void rotate_plain(float *x, int64_t n, float norm) {
  for (int64_t j = 0; j < n; j++) x[j] *= norm;
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; j++) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

#if defined(__AVX512F__)
/* The rounds of strides 1, 2, 4 and 8 on sixteen values: lane j pairs with lane j ^ h; the
 * lower of the two keeps the sum, the upper the lower minus the upper. */
static inline __m512 rotate16(__m512 v) {
  static const int32_t partner[4][16] = {
      {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
      {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
      {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
      {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},
  };
  static const __mmask16 upper[4] = {0xAAAA, 0xCCCC, 0xF0F0, 0xFF00};
  for (int s = 0; s < 4; s++) {
    const __m512 p = _mm512_permutexvar_ps(_mm512_loadu_si512(partner[s]), v);
    v = _mm512_mask_blend_ps(upper[s], _mm512_add_ps(v, p), _mm512_sub_ps(p, v));
  }
  return v;
}
#endif

void NK_FN(nk_hadamard_chunk)(float *x, int64_t n, float norm) {
#if defined(__AVX512F__)
  if (n >= 16) {
    const __m512 s = _mm512_set1_ps(norm);
    for (int64_t i = 0; i < n; i += 16) {
      _mm512_storeu_ps(x + i, rotate16(_mm512_mul_ps(_mm512_loadu_ps(x + i), s)));
    }
    for (int64_t h = 16; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; j += 16) {
          const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + h);
          _mm512_storeu_ps(x + j, _mm512_add_ps(a, b));
          _mm512_storeu_ps(x + j + h, _mm512_sub_ps(a, b));
        }
      }
    }
    return;
  }
#endif
  rotate_plain(x, n, norm);
}
