/*
 * Weights repacked at load for products of a few rows (batched decode, speculative
 * verification): sixteen rows interleaved four bytes at a time, so that one 64-byte load
 * holds four consecutive columns of sixteen rows and a 4-byte broadcast of one token's
 * activations feeds VPDPBUSD for all sixteen (the panel layout of kern_avx512.c, built once
 * instead of on every call). The bytes stay quantized: a repacked matrix is the size of
 * the GGUF tensor it comes from (Q4_K: 2.8% more), so a one-token step streams no more.
 *
 * Layouts, per group of sixteen rows (rows % 16 == 0), groups one after another:
 * - Q8_0_R16, per block of 32 columns (544 bytes): the sixteen rows' f16 scales, then eight
 *   units of 64 bytes, unit k holding columns 4k..4k+3 of rows 0..15 as q + 128 (u8).
 * - Q4_K_R16, per super-block of 256 columns (2368 bytes): sixteen f16 d, sixteen f16 dmin,
 *   the 6-bit scales as bytes [sub-block][row], the mins likewise, then for each of the four
 *   32-byte runs j eight units of 64 bytes: unit k holds bytes 4k..4k+3 of run j of rows
 *   0..15 (low nibbles: sub-block 2j, high nibbles: 2j + 1, as in the GGUF block).
 * - Q6_K_R16, per super-block of 256 columns (3360 bytes, sixteen GGUF blocks' worth):
 *   sixteen f16 d, the int8 scales as bytes [group of 16][row], then four quarters of 768
 *   bytes in the order the kernel reads them. Quarter 2n + h holds for u = 0..3, v = 4h + u,
 *   units of 64 bytes (a 4-byte word of each of rows 0..15): words v and v + 8 of half n's
 *   ql (at 64u and 256 + 64u), then word v of its qh (at 512 + 64u). Those three words
 *   hold columns 4v..4v+3 plus 0, 32, 64 and 96 of half n, as in the GGUF block. */
#include "dequant_ref.h"

int32_t nk_r16_base(int32_t type) {
  switch (type) {
    case NK_Q8_0_R16: return NK_Q8_0;
    case NK_Q4_K_R16: return NK_Q4_K;
    case NK_Q6_K_R16: return NK_Q6_K;
    default: return -1;
  }
}

int32_t nk_r16_type(int32_t type) {
  if (nk_best_isa() < NK_ISA_AVX512) return 0;
  switch (type) {
    case NK_Q8_0: return NK_Q8_0_R16;
    case NK_Q4_K: return NK_Q4_K_R16;
    case NK_Q6_K: return NK_Q6_K_R16;
    default: return 0;
  }
}

/* One group of sixteen rows, src at its first row, `nb` blocks per row. Each unit is four
 * bytes of a row, moved as one word. */
static void repack_q8_0(const uint8_t *src, int64_t row_bytes, int64_t nb, uint8_t *dst) {
  for (int64_t b = 0; b < nb; b++) {
    uint8_t *out = dst + b * NK_R16_Q8_0_BLOCK;
    uint32_t units[8][16];
    for (int r = 0; r < 16; r++) {
      const uint8_t *blk = src + r * row_bytes + b * 34;
      memcpy(out + 2 * r, blk, 2);
      uint32_t q[8];
      memcpy(q, blk + 2, 32);
      for (int k = 0; k < 8; k++) units[k][r] = q[k] ^ 0x80808080u;
    }
    memcpy(out + NK_R16_Q8_0_QS, units, sizeof units);
  }
}

static void repack_q4_k(const uint8_t *src, int64_t row_bytes, int64_t nb, uint8_t *dst) {
  for (int64_t b = 0; b < nb; b++) {
    uint8_t *out = dst + b * NK_R16_Q4_K_BLOCK;
    uint32_t units[32][16];
    for (int r = 0; r < 16; r++) {
      const uint8_t *blk = src + r * row_bytes + b * 144;
      memcpy(out + 2 * r, blk, 2);
      memcpy(out + NK_R16_Q4_K_DMIN + 2 * r, blk + 2, 2);
      for (int s = 0; s < 8; s++) {
        nk_k4_scale_min(s, blk + 4, &out[NK_R16_Q4_K_SCALES + 16 * s + r],
                        &out[NK_R16_Q4_K_MINS + 16 * s + r]);
      }
      uint32_t q[32];
      memcpy(q, blk + 16, 128);
      for (int u = 0; u < 32; u++) units[u][r] = q[u];
    }
    memcpy(out + NK_R16_Q4_K_QS, units, sizeof units);
  }
}

static void repack_q6_k(const uint8_t *src, int64_t row_bytes, int64_t nb, uint8_t *dst) {
  for (int64_t b = 0; b < nb; b++) {
    uint8_t *out = dst + b * NK_R16_Q6_K_BLOCK;
    uint32_t units[4][3][4][16];
    for (int r = 0; r < 16; r++) {
      const uint8_t *blk = src + r * row_bytes + b * 210;
      memcpy(out + 2 * r, blk + 208, 2);
      for (int g = 0; g < 16; g++) out[NK_R16_Q6_K_SCALES + 16 * g + r] = blk[192 + g];
      uint32_t l[32], h[16];
      memcpy(l, blk, 128);
      memcpy(h, blk + 128, 64);
      for (int q = 0; q < 4; q++) {
        const int n = q / 2;
        for (int u = 0; u < 4; u++) {
          const int v = 4 * (q % 2) + u;
          units[q][0][u][r] = l[16 * n + v];
          units[q][1][u][r] = l[16 * n + v + 8];
          units[q][2][u][r] = h[8 * n + v];
        }
      }
    }
    memcpy(out + NK_R16_Q6_K_QS, units, sizeof units);
  }
}

typedef struct {
  nk_pool *pool;
  int32_t type;
  const uint8_t *src;
  uint8_t *dst;
  /* Bytes of a group of sixteen rows, in the GGUF layout and repacked. */
  int64_t groups, src_group, dst_group, row_bytes, nb;
} repack_args;

static void repack_task(void *arg, int32_t ith, int32_t nth) {
  (void)ith;
  (void)nth;
  const repack_args *a = arg;
  for (int64_t g = nk_pool_next(a->pool); g < a->groups; g = nk_pool_next(a->pool)) {
    const uint8_t *src = a->src + g * a->src_group;
    uint8_t *dst = a->dst + g * a->dst_group;
    switch (a->type) {
      case NK_Q8_0: repack_q8_0(src, a->row_bytes, a->nb, dst); break;
      case NK_Q4_K: repack_q4_k(src, a->row_bytes, a->nb, dst); break;
      default: repack_q6_k(src, a->row_bytes, a->nb, dst); break;
    }
  }
}

int32_t nk_repack(nk_pool *pool, int32_t type, const void *src, int64_t rows, int64_t cols,
                  void *dst) {
  const int64_t rb = nk_row_bytes(type, cols);
  if (!pool || !src || !dst || rb < 0 || rows <= 0 || rows % 16 != 0) return NK_EINVAL;
  if (!nk_r16_type(type)) return NK_EUNSUPPORTED;
  repack_args a = {.pool = pool,
                   .type = type,
                   .src = src,
                   .dst = dst,
                   .groups = rows / 16,
                   .src_group = 16 * rb,
                   .dst_group = 16 * nk_row_bytes(nk_r16_type(type), cols),
                   .row_bytes = rb,
                   .nb = cols / nk_type_traits(type)->block_size};
  nk_pool_run(pool, repack_task, &a);
  return NK_OK;
}

/* Row r's f16 of the sixteen at p (a repacked block's scales), as f32. */
static float f16_of_row(const uint8_t *p, int r) {
  uint16_t h;
  memcpy(&h, p + 2 * r, 2);
  return nk_f16_to_f32_1(h);
}

/* Row r of a repacked Q8_0 matrix (dequantized as ggml's dequantize_row_q8_0). */
static void r16_row_q8_0(const uint8_t *group, int r, int64_t nb, float *y) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = group + b * NK_R16_Q8_0_BLOCK;
    const float d = f16_of_row(blk, r);
    for (int c = 0; c < 32; c++) {
      const uint8_t u = blk[NK_R16_Q8_0_QS + (c / 4) * 64 + 4 * r + c % 4];
      y[32 * b + c] = (float)(int8_t)(u ^ 0x80) * d;
    }
  }
}

/* As ggml's dequantize_row_q4_K. */
static void r16_row_q4_k(const uint8_t *group, int r, int64_t nb, float *y) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = group + b * NK_R16_Q4_K_BLOCK;
    const float d = f16_of_row(blk, r), dmin = f16_of_row(blk + NK_R16_Q4_K_DMIN, r);
    const uint8_t *sc = blk + NK_R16_Q4_K_SCALES + r, *mn = blk + NK_R16_Q4_K_MINS + r;
    for (int j = 0; j < 4; j++) {
      const float d1 = d * sc[16 * (2 * j)], m1 = dmin * mn[16 * (2 * j)];
      const float d2 = d * sc[16 * (2 * j + 1)], m2 = dmin * mn[16 * (2 * j + 1)];
      for (int l = 0; l < 32; l++) {
        const uint8_t q = blk[NK_R16_Q4_K_QS + j * 512 + (l / 4) * 64 + 4 * r + l % 4];
        y[256 * b + 64 * j + l] = d1 * (float)(q & 0xF) - m1;
        y[256 * b + 64 * j + 32 + l] = d2 * (float)(q >> 4) - m2;
      }
    }
  }
}

/* Value c (0-255) of row r of a repacked Q6_K super-block, unbiased (0-63). */
static int r16_q6_k_value(const uint8_t *blk, int r, int c) {
  const int n = c / 128, k = c % 128 / 32, l = c % 32;
  const uint8_t *quarter = blk + NK_R16_Q6_K_QS + 768 * (2 * n + l / 16) + 64 * (l % 16 / 4);
  const uint8_t ql = quarter[256 * (k & 1) + 4 * r + l % 4];
  const uint8_t qh = quarter[512 + 4 * r + l % 4];
  return (k < 2 ? ql & 0xF : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
}

/* As ggml's dequantize_row_q6_K. */
static void r16_row_q6_k(const uint8_t *group, int r, int64_t nb, float *y) {
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = group + b * NK_R16_Q6_K_BLOCK;
    const float d = f16_of_row(blk, r);
    for (int c = 0; c < 256; c++) {
      const int8_t sc = (int8_t)blk[NK_R16_Q6_K_SCALES + 16 * (c / 16) + r];
      y[256 * b + c] = d * sc * (float)(r16_q6_k_value(blk, r, c) - 32);
    }
  }
}

void nk_r16_dequantize_row(int32_t type, const uint8_t *w, int64_t r, int64_t cols, float *dst) {
  const int32_t base = nk_r16_base(type);
  const int64_t nb = cols / nk_type_traits(base)->block_size;
  const uint8_t *group = w + (r / 16) * 16 * nk_row_bytes(type, cols);
  switch (base) {
    case NK_Q8_0: r16_row_q8_0(group, (int)(r % 16), nb, dst); break;
    case NK_Q4_K: r16_row_q4_k(group, (int)(r % 16), nb, dst); break;
    default: r16_row_q6_k(group, (int)(r % 16), nb, dst); break;
  }
}

void nk_dequantize_table_row(int32_t type, const uint8_t *w, int64_t r, int64_t row_bytes,
                             int64_t cols, float *dst) {
  if (nk_type_traits(type)->r16) {
    nk_r16_dequantize_row(type, w, r, cols, dst);
  } else {
    nk_dequantize_row(type, w + r * row_bytes, cols, dst);
  }
}

/* Row r of a repacked Q6_K super-block times its activations: per group of 16,
 * d sc (d16 sum(q x) - 32 s16), q unbiased. */
static float r16_q6_k_dot(const uint8_t *blk, int r, const int8_t *xq, const float *d16,
                          const float *s16) {
  const float d = f16_of_row(blk, r);
  float sum = 0.0f;
  for (int g = 0; g < 16; g++) {
    int32_t dot = 0;
    for (int c = 16 * g; c < 16 * g + 16; c++) dot += r16_q6_k_value(blk, r, c) * xq[c];
    const int8_t sc = (int8_t)blk[NK_R16_Q6_K_SCALES + 16 * g + r];
    sum += d * sc * (d16[g] * (float)dot - 32.0f * s16[g]);
  }
  return sum;
}

/* The repacked products in plain C, for dispatch levels without a kernel for them (a pool
 * forced below AVX-512 by the checker): each block's integer dot product scaled as the
 * vector kernels scale it. */
void nk_r16_rows_portable(const nk_mm *mm, int64_t r0, int64_t r1) {
  const int32_t base = nk_r16_base(mm->type);
  const int64_t kp = mm->kp, nb = mm->cols / nk_type_traits(base)->block_size;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *group = mm->w + (r / 16) * 16 * mm->row_bytes;
    const int i = (int)(r % 16);
    for (int64_t t = 0; t < mm->n_tokens; t++) {
      const int8_t *xq = mm->act.q + t * kp;
      const float *d32 = mm->act.d32 + t * (kp / 32), *s32 = mm->act.s32 + t * (kp / 32);
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; b++) {
        if (base == NK_Q8_0) {
          const uint8_t *blk = group + b * NK_R16_Q8_0_BLOCK;
          int32_t dot = 0;
          for (int c = 0; c < 32; c++) {
            const uint8_t u = blk[NK_R16_Q8_0_QS + (c / 4) * 64 + 4 * i + c % 4];
            dot += (int32_t)(int8_t)(u ^ 0x80) * xq[32 * b + c];
          }
          sum += f16_of_row(blk, i) * d32[b] * (float)dot;
          continue;
        }
        if (base == NK_Q6_K) {
          sum += r16_q6_k_dot(group + b * NK_R16_Q6_K_BLOCK, i, xq + 256 * b,
                              mm->act.d16 + t * (kp / 16) + 16 * b,
                              mm->act.s16 + t * (kp / 16) + 16 * b);
          continue;
        }
        const uint8_t *blk = group + b * NK_R16_Q4_K_BLOCK;
        const float d = f16_of_row(blk, i), dmin = f16_of_row(blk + NK_R16_Q4_K_DMIN, i);
        for (int s = 0; s < 8; s++) {
          int32_t dot = 0;
          for (int l = 0; l < 32; l++) {
            const uint8_t q = blk[NK_R16_Q4_K_QS + (s / 2) * 512 + (l / 4) * 64 + 4 * i + l % 4];
            dot += (s % 2 ? q >> 4 : q & 0xF) * xq[256 * b + 32 * s + l];
          }
          sum += d * blk[NK_R16_Q4_K_SCALES + 16 * s + i] * d32[8 * b + s] * (float)dot -
                 dmin * blk[NK_R16_Q4_K_MINS + 16 * s + i] * s32[8 * b + s];
        }
      }
      nk_y_row(mm, t)[r] = sum;
    }
  }
}
