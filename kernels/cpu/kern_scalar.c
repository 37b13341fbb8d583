/*
 * Baseline x86-64 kernels: the same arithmetic as the SIMD levels (int8 activations per 32
 * values against the chunk form) in plain C, row by row for any number of tokens.
 */
#include "isa_common.h"

void NK_FN(nk_qdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  const int64_t kp = mm->kp, n_chunks = kp / NK_CHUNK;
  nk_chunk c;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *row = mm->w + r * mm->row_bytes;
    float acc[4] = {0};
    for (int64_t ch = 0; ch < n_chunks; ch++) {
      NK_FN(nk_unpack)(mm->type, row, ch, mm->cols, &c);
      for (int32_t j = 0; j < nt; j++) {
        const int64_t t = t0 + j;
        const int8_t *xq = mm->act.q + t * kp + ch * NK_CHUNK;
        const float *d16 = mm->act.d16 + t * (kp / 16) + ch * NK_GROUPS;
        const float *s16 = mm->act.s16 + t * (kp / 16) + ch * NK_GROUPS;
        float sum = 0.0f;
        for (int g = 0; g < NK_GROUPS; g++) {
          int32_t isum = 0;
          for (int i = 0; i < 16; i++) isum += (int32_t)c.u[16 * g + i] * xq[16 * g + i];
          sum += c.s[g] * d16[g] * (float)isum + c.m[g] * s16[g];
        }
        acc[j] += sum;
      }
    }
    for (int32_t j = 0; j < nt; j++) mm->y[(t0 + j) * mm->rows + r] = acc[j];
  }
}

void NK_FN(nk_fdot_rows)(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  float buf[NK_CHUNK];
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *row = mm->w + r * mm->row_bytes;
    float acc[4] = {0};
    for (int64_t k0 = 0; k0 < mm->cols; k0 += NK_CHUNK) {
      const int64_t n = mm->cols - k0 < NK_CHUNK ? mm->cols - k0 : NK_CHUNK;
      if (mm->type == NK_F32) {
        memcpy(buf, (const float *)row + k0, (size_t)n * 4);
      } else if (mm->type == NK_F16) {
        for (int64_t i = 0; i < n; i++) buf[i] = nk_f16_to_f32_1(((const uint16_t *)row)[k0 + i]);
      } else {
        for (int64_t i = 0; i < n; i++) buf[i] = nk_bf16_to_f32_1(((const uint16_t *)row)[k0 + i]);
      }
      for (int32_t j = 0; j < nt; j++) {
        const float *x = mm->x + (t0 + j) * mm->cols + k0;
        float sum = 0.0f;
        for (int64_t i = 0; i < n; i++) sum += buf[i] * x[i];
        acc[j] += sum;
      }
    }
    for (int32_t j = 0; j < nt; j++) mm->y[(t0 + j) * mm->rows + r] = acc[j];
  }
}
