/*
 * ggml block layouts (ggml-common.h) as byte offsets, and the reference dequantization of
 * one value: the slow, obviously-correct form that embedding lookups, the f16 expansion
 * for cuBLAS and the generic mat-vec kernel use. Each formula is the per-value reading of
 * ggml's dequantize_row_* (ggml-quants.c); the fast mat-vec kernels (vecdot.cuh) are
 * checked against it.
 */
#pragma once
#include "common.cuh"

/* Values per block and bytes per block. */
__device__ __forceinline__ int type_block_size(int type) {
  return (type == T_F32 || type == T_F16 || type == T_BF16) ? 1
         : (type >= T_Q2_K && type <= T_Q6_K)               ? 256
                                                              : 32;
}

__device__ __forceinline__ int type_block_bytes(int type) {
  switch (type) {
    case T_F32: return 4;
    case T_F16: return 2;
    case T_BF16: return 2;
    case T_Q4_0: return 18;
    case T_Q4_1: return 20;
    case T_Q5_0: return 22;
    case T_Q5_1: return 24;
    case T_Q8_0: return 34;
    case T_Q2_K: return 84;
    case T_Q3_K: return 110;
    case T_Q4_K: return 144;
    case T_Q5_K: return 176;
    case T_Q6_K: return 210;
    default: return 0;
  }
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
__device__ __forceinline__ void k4_scale_min(int j, const uint8_t *q, int &sc, int &m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/*
 * k4_scale_min on the 12 bytes loaded as three words s0, s1, s2 (bytes 0-3, 4-7, 8-11):
 * what the mat-vec units use, three loads instead of up to six byte loads per sub-block.
 */
__device__ __forceinline__ void k4_scale_min_w(int j, uint32_t s0, uint32_t s1, uint32_t s2,
                                               int &sc, int &m) {
  if (j < 4) {
    sc = (int)((s0 >> (8 * j)) & 63);
    m = (int)((s1 >> (8 * j)) & 63);
  } else {
    const int k = 8 * (j - 4);
    sc = (int)(((s2 >> k) & 0xF) | (((s0 >> (k + 6)) & 3) << 4));
    m = (int)(((s2 >> (k + 4)) & 0xF) | (((s1 >> (k + 6)) & 3) << 4));
  }
}

/* Q3_K: the 6-bit scale of sub-block is (0..15), still offset by 32. */
__device__ __forceinline__ int q3k_scale(int is, const uint8_t *s) {
  const int low = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
  const int high = (s[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
  return low | (high << 4);
}

/*
 * q3k_scale for the even sub-block `is` and is + 1 at once: their low nibbles share one
 * 16-bit word of the 12 scale bytes and their high bits the next, so two loads, not four.
 */
__device__ __forceinline__ void q3k_scale_pair(int is, const uint8_t *s, int &a, int &b) {
  const uint32_t lo = ld_u16(s + (is & 7));
  const uint32_t hi = ld_u16(s + 8 + (is & 3));
  const int shift = is < 8 ? 0 : 4, hs = 2 * (is >> 2);
  a = (int)(((lo >> shift) & 0xF) | (((hi >> hs) & 3) << 4));
  b = (int)(((lo >> (8 + shift)) & 0xF) | (((hi >> (8 + hs)) & 3) << 4));
}

/* Value `i` (0..31 or 0..255) of the block at `b`. */
__device__ __forceinline__ float dequant_in_block(int type, const uint8_t *b, int i) {
  switch (type) {
    case T_Q4_0: {
      const int q = i < 16 ? (b[2 + i] & 0xF) : (b[2 + i - 16] >> 4);
      return (float)(q - 8) * ld_f16(b);
    }
    case T_Q4_1: {
      const int q = i < 16 ? (b[4 + i] & 0xF) : (b[4 + i - 16] >> 4);
      return (float)q * ld_f16(b) + ld_f16(b + 2);
    }
    case T_Q5_0: {
      const uint32_t qh = (uint32_t)ld_i32_a2(b + 2);
      const int lo = i < 16 ? (b[6 + i] & 0xF) : (b[6 + i - 16] >> 4);
      const int q = lo | (int)(((qh >> i) & 1) << 4);
      return (float)(q - 16) * ld_f16(b);
    }
    case T_Q5_1: {
      const uint32_t qh = (uint32_t)ld_i32(b + 4);
      const int lo = i < 16 ? (b[8 + i] & 0xF) : (b[8 + i - 16] >> 4);
      const int q = lo | (int)(((qh >> i) & 1) << 4);
      return (float)q * ld_f16(b) + ld_f16(b + 2);
    }
    case T_Q8_0: return (float)(int8_t)b[2 + i] * ld_f16(b);
    case T_Q2_K: {
      const int h = i >> 7, r = i & 127, j = r >> 5, l = r & 31;
      const int q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
      const int sc = b[8 * h + 2 * j + (l >> 4)];
      return ld_f16(b + 80) * (float)(sc & 0xF) * (float)q - ld_f16(b + 82) * (float)(sc >> 4);
    }
    case T_Q3_K: {
      const int h = i >> 7, r = i & 127, j = r >> 5, l = r & 31;
      const int q = (b[32 + 32 * h + l] >> (2 * j)) & 3;
      const int hbit = (b[l] >> (4 * h + j)) & 1;
      const int sc = q3k_scale(8 * h + 2 * j + (l >> 4), b + 96) - 32;
      return ld_f16(b + 108) * (float)sc * (float)(q - (hbit ? 0 : 4));
    }
    case T_Q4_K: {
      const int j = i >> 6, r = i & 63;
      const int byte = b[16 + 32 * j + (r & 31)];
      const int q = r < 32 ? (byte & 0xF) : (byte >> 4);
      int sc, m;
      k4_scale_min(2 * j + (r >> 5), b + 4, sc, m);
      return ld_f16(b) * (float)sc * (float)q - ld_f16(b + 2) * (float)m;
    }
    case T_Q5_K: {
      const int j = i >> 6, r = i & 63, sub = 2 * j + (r >> 5), l = r & 31;
      const int byte = b[48 + 32 * j + l];
      const int q = (r < 32 ? (byte & 0xF) : (byte >> 4)) + (((b[16 + l] >> sub) & 1) << 4);
      int sc, m;
      k4_scale_min(sub, b + 4, sc, m);
      return ld_f16(b) * (float)sc * (float)q - ld_f16(b + 2) * (float)m;
    }
    case T_Q6_K: {
      const int h = i >> 7, r = i & 127, k = r >> 5, l = r & 31;
      const int lb = b[64 * h + 32 * (k & 1) + l];
      const int nib = k < 2 ? (lb & 0xF) : (lb >> 4);
      const int hb = (b[128 + 32 * h + l] >> (2 * k)) & 3;
      const int q = (nib | (hb << 4)) - 32;
      const int sc = (int8_t)b[192 + 8 * h + 2 * k + (l >> 4)];
      return ld_f16(b + 208) * (float)sc * (float)q;
    }
    default: return 0.0f;
  }
}

/* Column `col` of a row of `type` starting at `row`. */
__device__ __forceinline__ float dequant_value(int type, const uint8_t *row, int col) {
  switch (type) {
    case T_F32: EMU_CHECK_ALIGN(row + 4 * col, 4); return ((const float *)row)[col];
    case T_F16: return ld_f16(row + 2 * col);
    case T_BF16: return bf16_to_f32(ld_u16(row + 2 * col));
    default: {
      const int bs = type_block_size(type);
      return dequant_in_block(type, row + (col / bs) * type_block_bytes(type), col % bs);
    }
  }
}
