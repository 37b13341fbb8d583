/*
 * Reference dequantizers: plain ports of ggml's dequantize_row_* (ggml-quants.c), the
 * oracle the fast kernels are checked against and the embedding lookup's workhorse.
 */
#include "dequant_ref.h"

static const nk_traits TRAITS_F32 = {1, 4, 0, 0, 0, 0};
static const nk_traits TRAITS_F16 = {1, 2, 0, 0, 0, 0};
static const nk_traits TRAITS_BF16 = {1, 2, 0, 0, 0, 0};
static const nk_traits TRAITS_Q4_0 = {32, 18, 1, 32, 0, 0};
static const nk_traits TRAITS_Q4_1 = {32, 20, 1, 32, 0, 0};
static const nk_traits TRAITS_Q5_0 = {32, 22, 1, 32, 0, 0};
static const nk_traits TRAITS_Q5_1 = {32, 24, 1, 32, 0, 0};
static const nk_traits TRAITS_Q8_0 = {32, 34, 1, 32, 1, 0};
static const nk_traits TRAITS_Q2_K = {256, 84, 1, 16, 0, 0};
static const nk_traits TRAITS_Q3_K = {256, 110, 1, 16, 0, 0};
static const nk_traits TRAITS_Q4_K = {256, 144, 1, 32, 0, 0};
static const nk_traits TRAITS_Q5_K = {256, 176, 1, 32, 0, 0};
static const nk_traits TRAITS_Q6_K = {256, 210, 1, 16, 0, 0};
static const nk_traits TRAITS_Q8_0_R16 = {32, 34, 1, 32, 1, 1};
static const nk_traits TRAITS_Q4_K_R16 = {256, 148, 1, 32, 0, 1};
static const nk_traits TRAITS_Q6_K_R16 = {256, 210, 1, 16, 0, 1};

const nk_traits *nk_type_traits(int32_t type) {
  switch (type) {
    case NK_F32: return &TRAITS_F32;
    case NK_F16: return &TRAITS_F16;
    case NK_BF16: return &TRAITS_BF16;
    case NK_Q4_0: return &TRAITS_Q4_0;
    case NK_Q4_1: return &TRAITS_Q4_1;
    case NK_Q5_0: return &TRAITS_Q5_0;
    case NK_Q5_1: return &TRAITS_Q5_1;
    case NK_Q8_0: return &TRAITS_Q8_0;
    case NK_Q2_K: return &TRAITS_Q2_K;
    case NK_Q3_K: return &TRAITS_Q3_K;
    case NK_Q4_K: return &TRAITS_Q4_K;
    case NK_Q5_K: return &TRAITS_Q5_K;
    case NK_Q6_K: return &TRAITS_Q6_K;
    case NK_Q8_0_R16: return &TRAITS_Q8_0_R16;
    case NK_Q4_K_R16: return &TRAITS_Q4_K_R16;
    case NK_Q6_K_R16: return &TRAITS_Q6_K_R16;
    default: return NULL;
  }
}

int64_t nk_row_bytes(int32_t type, int64_t cols) {
  const nk_traits *tr = nk_type_traits(type);
  if (!tr || cols <= 0 || cols % tr->block_size != 0) return NK_EINVAL;
  return cols / tr->block_size * tr->type_size;
}

static void row_q4_0(const nk_block_q4_0 *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    for (int j = 0; j < 16; j++) {
      y[i * 32 + j] = (float)((x[i].qs[j] & 0x0F) - 8) * d;
      y[i * 32 + j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

static void row_q4_1(const nk_block_q4_1 *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    const float m = nk_f16_to_f32_1(x[i].m);
    for (int j = 0; j < 16; j++) {
      y[i * 32 + j] = (float)(x[i].qs[j] & 0x0F) * d + m;
      y[i * 32 + j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
    }
  }
}

static void row_q5_0(const nk_block_q5_0 *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    uint32_t qh;
    memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; j++) {
      const uint8_t xh0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
      y[i * 32 + j] = (float)(((x[i].qs[j] & 0x0F) | xh0) - 16) * d;
      y[i * 32 + j + 16] = (float)(((x[i].qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

static void row_q5_1(const nk_block_q5_1 *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    const float m = nk_f16_to_f32_1(x[i].m);
    uint32_t qh;
    memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < 16; j++) {
      const uint8_t xh0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
      const uint8_t xh1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
      y[i * 32 + j] = (float)((x[i].qs[j] & 0x0F) | xh0) * d + m;
      y[i * 32 + j + 16] = (float)((x[i].qs[j] >> 4) | xh1) * d + m;
    }
  }
}

static void row_q8_0(const nk_block_q8_0 *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    for (int j = 0; j < 32; j++) y[i * 32 + j] = (float)x[i].qs[j] * d;
  }
}

static void row_q2_k(const nk_block_q2_k *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    const float min = nk_f16_to_f32_1(x[i].dmin);
    const uint8_t *q = x[i].qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; j++) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
        for (int l = 0; l < 16; l++) *y++ = dl * (float)((int8_t)((q[l] >> shift) & 3)) - ml;
        sc = x[i].scales[is++];
        dl = d * (float)(sc & 0xF);
        ml = min * (float)(sc >> 4);
        for (int l = 0; l < 16; l++) {
          *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3)) - ml;
        }
        shift += 2;
      }
      q += 32;
    }
  }
}

static void row_q3_k(const nk_block_q3_k *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d_all = nk_f16_to_f32_1(x[i].d);
    const uint8_t *q = x[i].qs;
    const uint8_t *hm = x[i].hmask;
    uint8_t m = 1;
    int8_t scales[16];
    nk_q3_k_scales(x[i].scales, scales);
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; j++) {
        float dl = d_all * (float)(scales[is++] - 32);
        for (int l = 0; l < 16; l++) {
          *y++ = dl * (float)((int8_t)((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
        }
        dl = d_all * (float)(scales[is++] - 32);
        for (int l = 0; l < 16; l++) {
          *y++ = dl * (float)((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        }
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}

static void row_q4_k(const nk_block_q4_k *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const uint8_t *q = x[i].qs;
    const float d = nk_f16_to_f32_1(x[i].d);
    const float min = nk_f16_to_f32_1(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < 256; j += 64) {
      nk_k4_scale_min(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      nk_k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

static void row_q5_k(const nk_block_q5_k *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const uint8_t *ql = x[i].qs;
    const uint8_t *qh = x[i].qh;
    const float d = nk_f16_to_f32_1(x[i].d);
    const float min = nk_f16_to_f32_1(x[i].dmin);
    int is = 0;
    uint8_t sc, m, u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
      nk_k4_scale_min(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      nk_k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; l++) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; l++) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

static void row_q6_k(const nk_block_q6_k *x, int64_t nb, float *y) {
  for (int64_t i = 0; i < nb; i++) {
    const float d = nk_f16_to_f32_1(x[i].d);
    const uint8_t *ql = x[i].ql;
    const uint8_t *qh = x[i].qh;
    const int8_t *sc = x[i].scales;
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; l++) {
        const int is = l / 16;
        const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void nk_dequantize_row(int32_t type, const void *src, int64_t cols, float *dst) {
  const int64_t nb = cols / nk_type_traits(type)->block_size;
  switch (type) {
    case NK_F32: memcpy(dst, src, (size_t)cols * 4); break;
    case NK_F16: nk_f16_to_f32((const uint16_t *)src, dst, cols); break;
    case NK_BF16:
      for (int64_t i = 0; i < cols; i++) dst[i] = nk_bf16_to_f32_1(((const uint16_t *)src)[i]);
      break;
    case NK_Q4_0: row_q4_0(src, nb, dst); break;
    case NK_Q4_1: row_q4_1(src, nb, dst); break;
    case NK_Q5_0: row_q5_0(src, nb, dst); break;
    case NK_Q5_1: row_q5_1(src, nb, dst); break;
    case NK_Q8_0: row_q8_0(src, nb, dst); break;
    case NK_Q2_K: row_q2_k(src, nb, dst); break;
    case NK_Q3_K: row_q3_k(src, nb, dst); break;
    case NK_Q4_K: row_q4_k(src, nb, dst); break;
    case NK_Q5_K: row_q5_k(src, nb, dst); break;
    case NK_Q6_K: row_q6_k(src, nb, dst); break;
    default: break;
  }
}

int32_t nk_dequantize_rows(int32_t type, const void *src, int64_t n_rows, int64_t cols,
                           float *dst) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (rb < 0 || n_rows < 0 || !src || !dst) return NK_EINVAL;
  for (int64_t r = 0; r < n_rows; r++) {
    nk_dequantize_table_row(type, src, r, rb, cols, dst + r * cols);
  }
  return NK_OK;
}

void nk_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = nk_f16_to_f32_1(src[i]);
}

void nk_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = nk_f32_to_f16_1(src[i]);
}
