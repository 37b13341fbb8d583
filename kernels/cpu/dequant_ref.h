/* Reference dequantization helpers shared by the reference and unpacking code. */
#ifndef NK_DEQUANT_REF_H
#define NK_DEQUANT_REF_H

#include "nk_internal.h"

/* One row of `cols` values (a whole number of blocks) to f32. */
void nk_dequantize_row(int32_t type, const void *src, int64_t cols, float *dst);
/* Row r of a matrix of `type` at w, repacked or not (repack.c). */
void nk_dequantize_table_row(int32_t type, const uint8_t *w, int64_t r, int64_t row_bytes,
                             int64_t cols, float *dst);

/* Q3_K's twelve packed bytes to its sixteen 6-bit scales (biased by 32). */
static inline void nk_q3_k_scales(const uint8_t packed[12], int8_t out[16]) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  memcpy(out, aux, 16);
}

/* Q4_K / Q5_K: scale and min of sub-block j from the twelve packed bytes. */
static inline void nk_k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

#endif
