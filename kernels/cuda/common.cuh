/*
 * Shared by every kernel source: ggml type ids, half-precision conversions, loads whose
 * alignment is checked under the CPU emulator, and warp reductions.
 *
 * Kernels are plain CUDA C++ compiled to PTX by nvcc. The same sources also compile as
 * host C++ with NEURON_EMU defined (tests/cuda/emu), where every CUDA thread runs as a
 * fiber: that is how the kernels are checked on machines without a GPU. Hence the few
 * rules every kernel follows: no inline PTX outside this header, no dynamic shared memory,
 * multi-byte loads of weight and activation data only through the ld_* helpers below, and
 * EXPORT_KERNEL(name) after each kernel (the emulator's registry; nothing under nvcc).
 */
#pragma once

#ifdef NEURON_EMU
#include "emu.h"
#define EXPORT_KERNEL(name) EMU_REGISTER(name);
#else
#include <stdint.h>
#define EMU_CHECK_ALIGN(p, n) ((void)0)
#define EXPORT_KERNEL(name)
#endif

/* ggml type ids (ggml.h) of the types the kernels compute. */
enum {
  T_F32 = 0,
  T_F16 = 1,
  T_Q4_0 = 2,
  T_Q4_1 = 3,
  T_Q5_0 = 6,
  T_Q5_1 = 7,
  T_Q8_0 = 8,
  T_Q2_K = 10,
  T_Q3_K = 11,
  T_Q4_K = 12,
  T_Q5_K = 13,
  T_Q6_K = 14,
  T_BF16 = 30,
};

#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

/*
 * Strides a block's threads take at once over a row (STRIDES_AT_ONCE * blockDim.x values):
 * a decode step's few rows are few blocks, and a loop waiting on each stride's load in turn
 * is latency bound (on an H200 a one-block norm of a 4096-wide row took 20 us that way).
 */
#define STRIDES_AT_ONCE 4

/* v[u] = p[i0 + u * stride] for u < STRIDES_AT_ONCE (0 from n on), every load issued first. */
__device__ __forceinline__ void load_strides(const float *p, int i0, int stride, int n,
                                             float v[STRIDES_AT_ONCE]) {
#pragma unroll
  for (int u = 0; u < STRIDES_AT_ONCE; u++) v[u] = i0 + u * stride < n ? p[i0 + u * stride] : 0.0f;
}

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
#ifdef NEURON_EMU
  return emu_f16_to_f32(h);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#endif
}

/* Round to nearest even, as every f16 store of the CPU backend does. */
__device__ __forceinline__ uint16_t f32_to_f16(float f) {
#ifdef NEURON_EMU
  return emu_f32_to_f16(f);
#else
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) {
  return __uint_as_float((uint32_t)h << 16);
}

__device__ __forceinline__ uint16_t ld_u16(const uint8_t *p) {
  EMU_CHECK_ALIGN(p, 2);
  return *(const uint16_t *)p;
}

__device__ __forceinline__ float ld_f16(const uint8_t *p) { return f16_to_f32(ld_u16(p)); }

/* A 32-bit word at a 4-byte aligned address. */
__device__ __forceinline__ int ld_i32(const uint8_t *p) {
  EMU_CHECK_ALIGN(p, 4);
  return *(const int *)p;
}

/* A 32-bit word at a 2-byte aligned address (blocks of 18, 22, 34, 110 or 210 bytes). */
__device__ __forceinline__ int ld_i32_a2(const uint8_t *p) {
  return (int)((uint32_t)ld_u16(p) | ((uint32_t)ld_u16(p + 2) << 16));
}

__device__ __forceinline__ int4 ld_i128(const void *p) {
  EMU_CHECK_ALIGN(p, 16);
  return *(const int4 *)p;
}

__device__ __forceinline__ float4 ld_f4(const float *p) {
  EMU_CHECK_ALIGN(p, 16);
  return *(const float4 *)p;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Sum over a block of up to 32 warps; every thread gets the total. `scratch` holds 32. */
__device__ __forceinline__ float block_sum(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(t);
}
