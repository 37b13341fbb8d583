/*
 * What moe.cu's expert product kernels (quantized and float) share: the block size, the
 * slots of a group they take NT at a time, and the per-row reduction of their sums.
 */
#pragma once
#include "vecdot.cuh"

#define MOE_THREADS 128

/*
 * Sums acc[t] for the n slots in use over the `tpr` threads of each row (8, 16, or a
 * multiple of 32): the row's leader (row_leader) holds the totals. Slots past n are not
 * summed: a 16-stream decode step has one or two per expert, where 8 sums of 5 shuffles
 * each cost more than the products. Two calls in a row are safe: each starts with a
 * barrier after the last one's leaders have read `part`.
 */
template <int NT>
__device__ __forceinline__ void sum_row_slots(float acc[NT], int n, int tpr) {
  __shared__ float part[MOE_THREADS / 32][NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int width = tpr < 32 ? tpr : 32;
#pragma unroll
  for (int t = 0; t < NT; t++) {
    if (t < n) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        if (o < width) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
      }
    }
  }
  const int wpr = tpr >> 5;
  if (wpr <= 1) return;
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < NT; t++) part[warp][t] = acc[t];
  }
  __syncthreads();
  if (lane == 0 && warp % wpr == 0) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
      float s = 0.0f;
      for (int w = 0; w < wpr; w++) s += part[warp + w][t];
      acc[t] = s;
    }
  }
}

__device__ __forceinline__ bool row_leader(int tpr) {
  if (tpr < 32) return threadIdx.x % tpr == 0;
  return (threadIdx.x & 31) == 0 && (threadIdx.x >> 5) % (tpr >> 5) == 0;
}

/* Sums acc over each row's threads and writes slot t's value to y row out[t]. */
template <int NT>
__device__ __forceinline__ void reduce_slots(float acc[NT], float *y, const int out[NT], int row,
                                             int rows, int n, int tpr) {
  sum_row_slots<NT>(acc, n, tpr);
  if (row_leader(tpr) && row < rows) {
#pragma unroll
    for (int t = 0; t < NT; t++)
      if (t < n) y[(size_t)out[t] * rows + row] = acc[t];
  }
}

/* The slots [s0, s0 + n) of group order: their output rows and the x rows they read. */
template <int NT>
__device__ __forceinline__ void slots_of(const int *order, int s0, int n, int per_slot, int k,
                                         int out[NT], int xr[NT]) {
#pragma unroll
  for (int t = 0; t < NT; t++) {
    out[t] = t < n ? order[s0 + t] : 0;
    xr[t] = per_slot ? out[t] : out[t] / k;
  }
}
