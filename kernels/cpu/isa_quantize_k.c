/*
 * Activations quantized per 256 values for products whose weights are all K-quants
 * (nk_qact's per-256 form, ggml's Q8_K). One scale per super-block is what lets the
 * integer kernels (kern_avx512_q8k.c) add a super-block's sub-block products in int32 and
 * convert once; llama.cpp's K-quant dot products take the same form. The arithmetic is
 * quantize_act's (nk_act_round, isa_common.h), so every level quantizes alike.
 */
#include "isa_common.h"

/* Block b's q (in place in act->q) and its sums of 16 into every derived field. */
static void finish_block(const nk_qact *act, int64_t t, int64_t b, float d, const int32_t *sums) {
  const int64_t kp = act->kp;
  act->dk[t * (kp / 256) + b] = d;
  float *d16 = act->d16 + t * (kp / 16) + 16 * b, *s16 = act->s16 + t * (kp / 16) + 16 * b;
  for (int g = 0; g < 16; g++) {
    act->bsum[t * (kp / 16) + 16 * b + g] = (int16_t)sums[g];
    d16[g] = d;
    s16[g] = d * (float)sums[g];
  }
  for (int h = 0; h < 8; h++) {
    act->d32[t * (kp / 32) + 8 * b + h] = d;
    act->s32[t * (kp / 32) + 8 * b + h] = s16[2 * h] + s16[2 * h + 1];
  }
  /* Q4_K's order: each 128 as values 0-31, 64-95, 32-63, 96-127. */
  const int8_t *q = act->q + t * kp + 256 * b;
  int8_t *r = act->q4k + t * kp + 256 * b;
  for (int half = 0; half < 2; half++) {
    memcpy(r + 128 * half, q + 128 * half, 32);
    memcpy(r + 128 * half + 32, q + 128 * half + 64, 32);
    memcpy(r + 128 * half + 64, q + 128 * half + 32, 32);
    memcpy(r + 128 * half + 96, q + 128 * half + 96, 32);
  }
}

/* n (<= 256) values of x into q, zero-padded to 256; returns the scale. */
static float quantize_block_portable(const float *x, int64_t n, int8_t *q, int32_t *sums) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    const float a = x[i] < 0 ? -x[i] : x[i];
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = nk_act_inverse(d);
  for (int64_t i = 0; i < 256; i++) q[i] = i < n ? nk_act_round(x[i], id) : 0;
  for (int g = 0; g < 16; g++) {
    sums[g] = 0;
    for (int i = 0; i < 16; i++) sums[g] += q[16 * g + i];
  }
  return d;
}

#if defined(__AVX512F__)
static float quantize_block_avx512(const float *x, int8_t *q, int32_t *sums) {
  __m512 v[16];
  __m512 amax = _mm512_setzero_ps();
  for (int g = 0; g < 16; g++) {
    v[g] = _mm512_loadu_ps(x + 16 * g);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[g]));
  }
  const float d = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 id = _mm512_set1_ps(nk_act_inverse(d));
  for (int g = 0; g < 16; g++) {
    const __m512i qi = nk_act_round16(v[g], id);
    _mm_storeu_si128((__m128i *)(q + 16 * g), _mm512_cvtepi32_epi8(qi));
    sums[g] = _mm512_reduce_add_epi32(qi);
  }
  return d;
}
#endif

void NK_FN(nk_quantize_act_k)(const float *x, int64_t cols, const nk_qact *act, int64_t t) {
  for (int64_t b = 0; b < act->kp / 256; b++) {
    const int64_t c0 = 256 * b, n = cols - c0 < 256 ? (cols > c0 ? cols - c0 : 0) : 256;
    int8_t *q = act->q + t * act->kp + c0;
    int32_t sums[16];
    float d;
#if defined(__AVX512F__)
    if (n == 256) {
      d = quantize_block_avx512(x + c0, q, sums);
    } else {
      d = quantize_block_portable(x + c0, n, q, sums);
    }
#else
    d = quantize_block_portable(x + c0, n, q, sums);
#endif
    finish_block(act, t, b, d, sums);
  }
}
