/*
 * KV stores: each row of a step that belongs to a sequence (`row_seq`, -1 for none) writes
 * its K and V at its position's slot in that sequence's blocks (tables[s * table_stride
 * ...]). An f32 or f16 cache takes the values as they are (f16 rounded to nearest even);
 * a q8_0 or q4_0 cache takes ggml's blocks.
 */
#include "kv_cache.cuh"

#define STORE_WARPS 4

__device__ __forceinline__ void kv_put(float *p, float v) { *p = v; }
__device__ __forceinline__ void kv_put(uint16_t *p, float v) { *p = f32_to_f16(v); }

/* Writes each row's K and V (kv_dim = kv_heads * head_dim values) at its position's slot.
 * grid (ceil(kv_dim / 128), rows), 128 threads. */
template <typename KV>
__device__ __forceinline__ void kv_store(KV *kc, KV *vc, const float *k, const float *v,
                                         const int *positions, const int *row_seq,
                                         const int *tables, int table_stride, int rows,
                                         int kv_dim, int block_size) {
  const int t = blockIdx.y;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows || e >= kv_dim) return;
  const int seq = row_seq[t];
  if (seq < 0) return;
  const size_t slot = kv_slot(tables + (size_t)seq * table_stride, positions[t], block_size);
  kv_put(kc + slot * kv_dim + e, k[(size_t)t * kv_dim + e]);
  kv_put(vc + slot * kv_dim + e, v[(size_t)t * kv_dim + e]);
}

extern "C" __global__ void kv_store_f32(float *kc, float *vc, const float *k, const float *v,
                                        const int *positions, const int *row_seq,
                                        const int *tables, int table_stride, int rows,
                                        int kv_dim, int block_size) {
  kv_store(kc, vc, k, v, positions, row_seq, tables, table_stride, rows, kv_dim, block_size);
}
EXPORT_KERNEL(kv_store_f32)

extern "C" __global__ void kv_store_f16(uint16_t *kc, uint16_t *vc, const float *k,
                                        const float *v, const int *positions,
                                        const int *row_seq, const int *tables,
                                        int table_stride, int rows, int kv_dim,
                                        int block_size) {
  kv_store(kc, vc, k, v, positions, row_seq, tables, table_stride, rows, kv_dim, block_size);
}
EXPORT_KERNEL(kv_store_f16)

/*
 * The quantized stores: lane j of a warp holds value j of a 32-value block and the warp
 * writes the block as ggml's reference quantizers do (quantize_row_q8_0_ref,
 * quantize_row_q4_0_ref; kernels/cpu/kv_quant.c), so the device cache holds the CPU
 * cache's bytes. The rounded intrinsics keep nvcc from fusing x * id + 8.5 into an FMA,
 * which the reference never does.
 */
__device__ __forceinline__ void st_u16(uint8_t *p, uint16_t v) {
  EMU_CHECK_ALIGN(p, 2);
  *(uint16_t *)p = v;
}

/* q8_0 as llama.cpp's CPU backend writes it (ggml's x86 quantize_row_q8_0): d = amax / 127,
 * value x as x * (127 / amax) rounded half to even. */
__device__ __forceinline__ void quantize_q8_0(uint8_t *block, float x, int lane) {
  const float amax = warp_max(fabsf(x));
  const float d = __fdiv_rn(amax, 127.0f), id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  if (lane == 0) st_u16(block, f32_to_f16(d));
  block[2 + lane] = (uint8_t)(int8_t)rintf(__fmul_rn(x, id));
}

/* q4_0: the signed value of largest magnitude (the first one, on a tie) maps to -8. */
__device__ __forceinline__ void quantize_q4_0(uint8_t *block, float x, int lane) {
  float amax = fabsf(x);
  int at = lane;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float a = __shfl_xor_sync(0xffffffffu, amax, o);
    const int i = __shfl_xor_sync(0xffffffffu, at, o);
    if (a > amax || (a == amax && i < at)) amax = a, at = i;
  }
  // All zeros: the reference never leaves its initial max of +0.
  const float max = amax == 0.0f ? 0.0f : __shfl_sync(0xffffffffu, x, at);
  const float d = __fdiv_rn(max, -8.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const int q = imin(15, (int8_t)__fadd_rn(__fmul_rn(x, id), 8.5f));
  const int hi = __shfl_sync(0xffffffffu, q, (lane + 16) & 31);
  if (lane == 0) st_u16(block, f32_to_f16(d));
  if (lane < 16) block[2 + lane] = (uint8_t)(q | (hi << 4));
}

/* grid (ceil(kv_dim / 128), rows), 128 threads: one warp per block; kv_dim a multiple
 * of 32. */
template <typename KV, void (*QUANTIZE)(uint8_t *, float, int)>
__device__ __forceinline__ void kv_store_quant(uint8_t *kc, uint8_t *vc, const float *k,
                                               const float *v, const int *positions,
                                               const int *row_seq, const int *tables,
                                               int table_stride, int rows, int kv_dim,
                                               int block_size) {
  const int t = blockIdx.y, lane = threadIdx.x & 31;
  const int b = blockIdx.x * STORE_WARPS + (threadIdx.x >> 5);
  if (t >= rows || 32 * b >= kv_dim) return;
  const int seq = row_seq[t];
  if (seq < 0) return;
  const size_t slot = kv_slot(tables + (size_t)seq * table_stride, positions[t], block_size);
  const size_t at = (slot * (kv_dim / 32) + b) * KV::BYTES_32;
  const size_t from = (size_t)t * kv_dim + 32 * b + lane;
  QUANTIZE(kc + at, k[from], lane);
  QUANTIZE(vc + at, v[from], lane);
}

extern "C" __global__ void kv_store_q8_0(uint8_t *kc, uint8_t *vc, const float *k,
                                         const float *v, const int *positions,
                                         const int *row_seq, const int *tables,
                                         int table_stride, int rows, int kv_dim,
                                         int block_size) {
  kv_store_quant<KvQ8_0, quantize_q8_0>(kc, vc, k, v, positions, row_seq, tables,
                                        table_stride, rows, kv_dim, block_size);
}
EXPORT_KERNEL(kv_store_q8_0)

extern "C" __global__ void kv_store_q4_0(uint8_t *kc, uint8_t *vc, const float *k,
                                         const float *v, const int *positions,
                                         const int *row_seq, const int *tables,
                                         int table_stride, int rows, int kv_dim,
                                         int block_size) {
  kv_store_quant<KvQ4_0, quantize_q4_0>(kc, vc, k, v, positions, row_seq, tables,
                                        table_stride, rows, kv_dim, block_size);
}
EXPORT_KERNEL(kv_store_q4_0)

/* dst = the values of src (n, a multiple of 32) as the q8_0 blocks they quantize to stand
 * for: the queries that meet a quantized K, as llama.cpp's q8_0 dot product has them (and
 * the CPU kernels, kernels/cpu/kv_quant.c). grid ceil(n / 128), 128 threads. */
extern "C" __global__ void q8_0_round(float *dst, const float *src, int n) {
  const int lane = threadIdx.x & 31;
  const int b = blockIdx.x * STORE_WARPS + (threadIdx.x >> 5);
  if (32 * b >= n) return;
  const float x = src[32 * b + lane];
  const float amax = warp_max(fabsf(x));
  const float d = __fdiv_rn(amax, 127.0f), id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  dst[32 * b + lane] = __fmul_rn(rintf(__fmul_rn(x, id)), f16_to_f32(f32_to_f16(d)));
}
EXPORT_KERNEL(q8_0_round)
