/*
 * The paged KV cache as the kernels see it. Per layer K and V are
 * [n_blocks][block_size][kv_heads][head row], a head's row being head_dim values of f32 or
 * f16, or head_dim / 32 of ggml's q8_0 or q4_0 blocks (34 and 18 bytes: an f16 scale, then
 * 32 int8, or 32 nibbles). Sequence s's block table maps its position p to the slot
 * table[p / block_size] * block_size + p % block_size.
 */
#pragma once

#include "common.cuh"

/*
 * The cache types: the bytes of 32 values, value e of a head's row as attention reads it
 * (a quantized row is dequantized on load, its block's scale times its integer, as ggml's
 * dequantizers do), and values e..e+7 (e a multiple of 8) in as few loads as the layout
 * allows: 16-byte loads for f32 and f16 rows; a quantized block is only 2-byte aligned (34
 * and 18 bytes), so its 8 integers come as four 2-byte loads.
 */
struct KvF32 {
  static constexpr int BYTES_32 = 128;
  __device__ static float load(const uint8_t *row, int e) { return ((const float *)row)[e]; }
  __device__ static void load8(const uint8_t *row, int e, float *out) {
    const float4 a = ld_f4((const float *)row + e), b = ld_f4((const float *)row + e + 4);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  }
};

struct KvF16 {
  static constexpr int BYTES_32 = 64;
  __device__ static float load(const uint8_t *row, int e) { return ld_f16(row + 2 * e); }
  __device__ static void load8(const uint8_t *row, int e, float *out) {
    const int4 w = ld_i128(row + 2 * e);
    const uint32_t u[4] = {(uint32_t)w.x, (uint32_t)w.y, (uint32_t)w.z, (uint32_t)w.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      out[2 * i] = f16_to_f32((uint16_t)(u[i] & 0xffffu));
      out[2 * i + 1] = f16_to_f32((uint16_t)(u[i] >> 16));
    }
  }
};

struct KvQ8_0 {
  static constexpr int BYTES_32 = 34;
  __device__ static float load(const uint8_t *row, int e) {
    const uint8_t *b = row + (e >> 5) * 34;
    return ld_f16(b) * (float)(int8_t)b[2 + (e & 31)];
  }
  __device__ static void load8(const uint8_t *row, int e, float *out) {
    const uint8_t *b = row + (e >> 5) * 34;
    const float d = ld_f16(b);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint16_t w = ld_u16(b + 2 + (e & 31) + 2 * i);
      out[2 * i] = d * (float)(int8_t)(w & 0xff);
      out[2 * i + 1] = d * (float)(int8_t)(w >> 8);
    }
  }
};

/* Value i of a q4_0 block is the low nibble of byte i for i < 16, else the high nibble of
 * byte i - 16, stored with a bias of 8. */
struct KvQ4_0 {
  static constexpr int BYTES_32 = 18;
  __device__ static float load(const uint8_t *row, int e) {
    const uint8_t *b = row + (e >> 5) * 18;
    const int i = e & 31, byte = b[2 + (i & 15)];
    return ld_f16(b) * (float)((i < 16 ? byte & 15 : byte >> 4) - 8);
  }
  __device__ static void load8(const uint8_t *row, int e, float *out) {
    const uint8_t *b = row + (e >> 5) * 18;
    const float d = ld_f16(b);
    const int i = e & 31, shift = i < 16 ? 0 : 4;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int w = ld_u16(b + 2 + (i & 15) + 2 * k) >> shift;
      out[2 * k] = d * (float)((w & 15) - 8);
      out[2 * k + 1] = d * (float)(((w >> 8) & 15) - 8);
    }
  }
};

__device__ __forceinline__ size_t kv_slot(const int *table, int pos, int block_size) {
  return (size_t)table[pos / block_size] * block_size + pos % block_size;
}

/* Head kvh's row at cache position `slot`. */
template <typename KV>
__device__ __forceinline__ const uint8_t *kv_row(const uint8_t *cache, size_t slot,
                                                 int kv_heads, int kvh, int head_dim) {
  return cache + (slot * kv_heads + kvh) * (size_t)(head_dim / 32 * KV::BYTES_32);
}
