/*
 * Activations quantized per 256 values for products whose weights are all K-quants
 * (nk_qact's per-256 form, ggml's Q8_K). One scale per super-block is what lets the
 * integer kernels (kern_avx512_q8k.c) add a super-block's sub-block products in int32 and
 * convert once; llama.cpp's K-quant dot products take the same form. The arithmetic is
 * quantize_act's (nk_act_round, isa_common.h), so every level quantizes alike.
 */
#include "isa_common.h"

/* Block b's values in Q4_K's order: each 128 as values 0-31, 64-95, 32-63, 96-127. */
static void reorder_q4k(const nk_qact *act, int64_t t, int64_t b) {
  const int8_t *q = act->q + t * act->kp + 256 * b;
  int8_t *r = act->q4k + t * act->kp + 256 * b;
  for (int half = 0; half < 2; half++) {
    memcpy(r + 128 * half, q + 128 * half, 32);
    memcpy(r + 128 * half + 32, q + 128 * half + 64, 32);
    memcpy(r + 128 * half + 64, q + 128 * half + 32, 32);
    memcpy(r + 128 * half + 96, q + 128 * half + 96, 32);
  }
}

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
    act->bsum32[t * (kp / 32) + 8 * b + h] = (int16_t)(sums[2 * h] + sums[2 * h + 1]);
    act->d32[t * (kp / 32) + 8 * b + h] = d;
    act->s32[t * (kp / 32) + 8 * b + h] = s16[2 * h] + s16[2 * h + 1];
  }
  reorder_q4k(act, t, b);
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
/* A whole block b of token t into every field: the arithmetic of quantize_block_portable
 * and finish_block, the sums of 16 added across lanes at once and each field stored a
 * vector at a time. A 2 x 3072 Q4_K product on one thread, mostly this quantization, went
 * from 1.23 to 0.84 us; it runs on one thread while the others wait, once per product. */
static void quantize_block_avx512(const float *x, const nk_qact *act, int64_t t, int64_t b) {
  const int64_t kp = act->kp;
  __m512 v[16];
  __m512 amax = _mm512_setzero_ps();
  for (int g = 0; g < 16; g++) {
    v[g] = _mm512_loadu_ps(x + 16 * g);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v[g]));
  }
  const float d = _mm512_reduce_max_ps(amax) / 127.0f;
  const __m512 id = _mm512_set1_ps(nk_act_inverse(d));
  int8_t *q = act->q + t * kp + 256 * b;
  /* The values as floats: their sums of 16 (at most 16 * 127) add up exactly in f32. */
  __m512 qf[16];
  for (int g = 0; g < 16; g++) {
    const __m512i qi = nk_act_round16(v[g], id);
    _mm_storeu_si128((__m128i *)(q + 16 * g), _mm512_cvtepi32_epi8(qi));
    qf[g] = _mm512_cvtepi32_ps(qi);
  }
  const __m512 sumf = nk_sum16_ps(qf);
  const __m512i sums = _mm512_cvtps_epi32(sumf);
  const __m512 dv = _mm512_set1_ps(d);
  const __m512 s16 = _mm512_mul_ps(dv, sumf);
  act->dk[t * (kp / 256) + b] = d;
  const __m256i sums16 = _mm512_cvtepi32_epi16(sums);
  _mm256_storeu_si256((__m256i *)(act->bsum + t * (kp / 16) + 16 * b), sums16);
  _mm_storeu_si128((__m128i *)(act->bsum32 + t * (kp / 32) + 8 * b),
                   _mm256_cvtepi32_epi16(_mm256_madd_epi16(sums16, _mm256_set1_epi16(1))));
  _mm512_storeu_ps(act->d16 + t * (kp / 16) + 16 * b, dv);
  _mm512_storeu_ps(act->s16 + t * (kp / 16) + 16 * b, s16);
  _mm256_storeu_ps(act->d32 + t * (kp / 32) + 8 * b, _mm512_castps512_ps256(dv));
  /* s32[h] = s16[2h] + s16[2h + 1], in the order finish_block adds them. */
  const __m512 pairs = _mm512_add_ps(s16, _mm512_permute_ps(s16, 0xB1));
  const __m512 even = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0), pairs);
  _mm256_storeu_ps(act->s32 + t * (kp / 32) + 8 * b, _mm512_castps512_ps256(even));
  reorder_q4k(act, t, b);
}
#endif

void NK_FN(nk_quantize_act_k)(const float *x, int64_t cols, const nk_qact *act, int64_t t) {
  for (int64_t b = 0; b < act->kp / 256; b++) {
    const int64_t c0 = 256 * b, n = cols - c0 < 256 ? (cols > c0 ? cols - c0 : 0) : 256;
#if defined(__AVX512F__)
    if (n == 256) {
      quantize_block_avx512(x + c0, act, t, b);
      continue;
    }
#endif
    int32_t sums[16];
    const float d = quantize_block_portable(x + c0, n, act->q + t * act->kp + c0, sums);
    finish_block(act, t, b, d, sums);
  }
}
