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
 * The cache types: the bytes of 32 values, and value e of a head's row as attention reads
 * it (a quantized row is dequantized on load, its block's scale times its integer, as
 * ggml's dequantizers do).
 */
struct KvF32 {
  static constexpr int BYTES_32 = 128;
  __device__ static float load(const uint8_t *row, int e) { return ((const float *)row)[e]; }
};

struct KvF16 {
  static constexpr int BYTES_32 = 64;
  __device__ static float load(const uint8_t *row, int e) { return ld_f16(row + 2 * e); }
};

struct KvQ8_0 {
  static constexpr int BYTES_32 = 34;
  __device__ static float load(const uint8_t *row, int e) {
    const uint8_t *b = row + (e >> 5) * 34;
    return ld_f16(b) * (float)(int8_t)b[2 + (e & 31)];
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
