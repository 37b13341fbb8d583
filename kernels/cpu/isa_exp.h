/* exp(x) in f32 (Cephes' polynomial, about 1 ulp), written so that loops over it vectorize:
 * no branches, no libm call. Inputs below -87.3 return about 1e-38 instead of less. */
#ifndef NK_ISA_EXP_H
#define NK_ISA_EXP_H

#include <stdint.h>
#include <string.h>

static inline float nk_expf(float x) {
  x = x < 88.3762626647949f ? x : 88.3762626647949f;
  x = x > -87.3365447505531f ? x : -87.3365447505531f;
  const float fx = x * 1.44269504088896341f + 0.5f;
  int32_t n = (int32_t)fx;
  n -= (fx < (float)n);
  const float fn = (float)n;
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const uint32_t bits = (uint32_t)(n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, 4);
  return y * scale;
}

#endif
