/*
 * The experts' products for prefill and large batches, where each chosen expert has many
 * slots: a tiled product per expert group (moe.cu's grouping) instead of mat-vec rows.
 * A block takes GT_ROWS rows of its group's expert and GT_SLOTS of its slots at a time,
 * and per GT_K columns stages the weights as int8 (tiles.cuh) and the q8_1 activations in
 * shared memory; each thread then sums a 4 x 4 patch of (row, slot) with __dp4a, so a
 * weight is unpacked once per 32 slots and an activation read once per 64 rows, where the
 * mat-vec kernels unpack per slot and re-read activations per row (77% of a qwen3-30b-a3b
 * 512-token prefill on an H200, at 17-48 GB/s).
 *
 * Grid (ceil(rows / GT_ROWS), groups), GT_THREADS threads. y[slot][row] as mmvq_e_* leave
 * it; sums in another order than theirs, so equal to float rounding, not bitwise.
 */
#include "tiles.cuh"

#define GT_ROWS 64
#define GT_SLOTS 32
#define GT_K 256
#define GT_THREADS 128
/* Words of a staged row: GT_K / 4, plus 4 so that the 8 rows a quarter-warp reads with
 * 16-byte loads fall in different banks. */
#define GT_STRIDE (GT_K / 4 + 4)

template <class U>
__device__ __forceinline__ void experts_gemm(float *y, const uint8_t *w, int stride,
                                             const int8_t *xq, const float2 *xd,
                                             const int *order, const int *gexp,
                                             const int *gstart, int rows, int cols,
                                             int row_bytes, int kp, int per_slot, int k) {
  constexpr int UV = U::VALUES, UPK = GT_K / UV;
  __shared__ int4 ws[GT_ROWS][GT_STRIDE / 4];
  __shared__ float wsc[GT_ROWS][GT_K / 16];
  __shared__ float wmn[GT_ROWS][GT_K / 32];
  __shared__ int4 xs[GT_SLOTS][GT_STRIDE / 4];
  __shared__ float2 xds[GT_SLOTS][GT_K / 32];
  __shared__ int xrow[GT_SLOTS];
  const int g = blockIdx.y;
  const int e = gexp[g];
  if (e < 0) return;
  const int tid = threadIdx.x, tr = tid % 16, ts = tid / 16;
  const int row0 = blockIdx.x * GT_ROWS;
  const uint8_t *we = w + (size_t)e * stride;
  const int units = cols / UV;
  for (int s0 = gstart[g]; s0 < gstart[g + 1]; s0 += GT_SLOTS) {
    const int n = imin(GT_SLOTS, gstart[g + 1] - s0);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    __syncthreads();
    if (tid < GT_SLOTS) {
      const int slot = tid < n ? order[s0 + tid] : -1;
      xrow[tid] = slot < 0 ? -1 : per_slot ? slot : slot / k;
    }
    for (int k0 = 0; k0 < cols; k0 += GT_K) {
      __syncthreads();
      for (int t = tid; t < GT_ROWS * UPK; t += GT_THREADS) {
        const int r = t / UPK, c = t % UPK, row = row0 + r, u = k0 / UV + c;
        int q[UV / 4];
        float sc[UV / 16], mn[UV / 32];
        if (row < rows && u < units) {
          U unit;
          unit.load(we + (size_t)row * row_bytes, u);
          tile_of(unit, q, sc, mn);
        } else {
#pragma unroll
          for (int i = 0; i < UV / 4; i++) q[i] = 0;
#pragma unroll
          for (int i = 0; i < UV / 16; i++) sc[i] = 0.0f;
#pragma unroll
          for (int i = 0; i < UV / 32; i++) mn[i] = 0.0f;
        }
        int *dst = (int *)ws[r] + c * (UV / 4);
#pragma unroll
        for (int i = 0; i < UV / 4; i++) dst[i] = q[i];
#pragma unroll
        for (int i = 0; i < UV / 16; i++) wsc[r][c * (UV / 16) + i] = sc[i];
#pragma unroll
        for (int i = 0; i < UV / 32; i++) wmn[r][c * (UV / 32) + i] = mn[i];
      }
      for (int t = tid; t < GT_SLOTS * (GT_K / 16); t += GT_THREADS) {
        const int sl = t / (GT_K / 16), c = t % (GT_K / 16), xr = xrow[sl];
        int4 v = {0, 0, 0, 0};
        if (xr >= 0) v = ld_i128(xq + (size_t)xr * kp + k0 + 16 * c);
        xs[sl][c] = v;
      }
      for (int t = tid; t < GT_SLOTS * (GT_K / 32); t += GT_THREADS) {
        const int sl = t / (GT_K / 32), b = t % (GT_K / 32), xr = xrow[sl];
        xds[sl][b] = xr >= 0 ? xd[(size_t)xr * (kp / 32) + k0 / 32 + b] : make_float2(0.0f, 0.0f);
      }
      __syncthreads();
#pragma unroll 2
      for (int h = 0; h < GT_K / 16; h++) {
        int4 wv[4], xv[4];
        float wscale[4];
        float2 xscale[4];
#pragma unroll
        for (int i = 0; i < 4; i++) wv[i] = ws[tr + 16 * i][h], wscale[i] = wsc[tr + 16 * i][h];
#pragma unroll
        for (int j = 0; j < 4; j++) xv[j] = xs[ts + 8 * j][h], xscale[j] = xds[ts + 8 * j][h / 2];
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
          for (int j = 0; j < 4; j++) {
            int s = __dp4a(wv[i].x, xv[j].x, 0);
            s = __dp4a(wv[i].y, xv[j].y, s);
            s = __dp4a(wv[i].z, xv[j].z, s);
            s = __dp4a(wv[i].w, xv[j].w, s);
            acc[i][j] += wscale[i] * xscale[j].x * (float)s;
          }
        }
        if (h & 1) {
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const float m = wmn[tr + 16 * i][h / 2];
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] -= m * xscale[j].y;
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int sl = ts + 8 * j;
      if (sl >= n) continue;
      const int slot = order[s0 + sl];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int row = row0 + tr + 16 * i;
        if (row < rows) y[(size_t)slot * rows + row] = acc[i][j];
      }
    }
  }
}

#define MMQ_E(NAME, UNIT)                                                                      \
  extern "C" __global__ void __launch_bounds__(GT_THREADS) mmq_e_##NAME(                      \
      float *y, const uint8_t *__restrict__ w, int stride, const int8_t *__restrict__ xq,     \
      const float2 *__restrict__ xd, const int *order, const int *gexp, const int *gstart,    \
      int rows, int cols, int row_bytes, int kp, int per_slot, int k) {                       \
    experts_gemm<UNIT>(y, w, stride, xq, xd, order, gexp, gstart, rows, cols, row_bytes, kp,  \
                       per_slot, k);                                                          \
  }                                                                                           \
  EXPORT_KERNEL(mmq_e_##NAME)

MMQ_E(q4_0, UnitQ4_0)
MMQ_E(q4_1, UnitQ4_1)
MMQ_E(q5_0, UnitQ5_0)
MMQ_E(q5_1, UnitQ5_1)
MMQ_E(q8_0, UnitQ8_0)
MMQ_E(q3_k, UnitQ3_K)
MMQ_E(q4_k, UnitQ4_K)
MMQ_E(q5_k, UnitQ5_K)
MMQ_E(q6_k, UnitQ6_K)
