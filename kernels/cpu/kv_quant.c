/*
 * The quantized KV cache types, q8_0 and q4_0: rows quantized as llama.cpp's CPU backend
 * quantizes them (ggml's x86 quantize_row_q8_0; quantize_row_q4_0_ref), so a cache written
 * here holds the bytes llama.cpp's -ctk/-ctv would. Reading goes through the
 * dequantizers the weights use (dequant_ref.c) or the attention kernels' own.
 */
#include <math.h>

#include "nk_internal.h"

/* As ggml's x86 quantize_row_q8_0 (what llama.cpp's CPU backend writes a q8_0 cache and
 * a dot product's q8_0 side with): 127 / amax as the multiplier, halves to even. */
static void q8_0_block(const float *x, nk_block_q8_0 *y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; j++) {
    /* fmaxf without the call this file's baseline ISA makes of it (a NaN is skipped alike). */
    const float a = fabsf(x[j]);
    amax = a > amax ? a : amax;
  }
  const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
  y->d = nk_f32_to_f16_1(d);
  /* nearbyintf, halves to even, without a call: adding and taking away 1.5 * 2^23 leaves a
   * float of magnitude <= 127 rounded to an integer in the default rounding mode. */
  for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)((x[j] * id + 12582912.0f) - 12582912.0f);
}

static void q4_0_block(const float *x, nk_block_q4_0 *y) {
  /* The signed value of largest magnitude maps to -8, so the grid spends its extra step
   * on that value's side. */
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; j++) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = nk_f32_to_f16_1(d);
  for (int j = 0; j < 16; j++) {
    const int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[16 + j] * id + 8.5f);
    y->qs[j] = (uint8_t)((lo < 15 ? lo : 15) | ((hi < 15 ? hi : 15) << 4));
  }
}

void nk_kv_quantize_row(int32_t type, const float *src, int64_t n, void *dst) {
  for (int64_t b = 0; b < n / 32; b++) {
    if (type == NK_Q8_0) q8_0_block(src + 32 * b, (nk_block_q8_0 *)dst + b);
    else q4_0_block(src + 32 * b, (nk_block_q4_0 *)dst + b);
  }
}

void nk_q8_0_round(const float *src, int64_t n, float *dst) {
  nk_block_q8_0 b;
  for (int64_t i = 0; i < n / 32; i++) {
    q8_0_block(src + 32 * i, &b);
    const float d = nk_f16_to_f32_1(b.d);
    for (int j = 0; j < 32; j++) dst[32 * i + j] = (float)b.qs[j] * d;
  }
}
