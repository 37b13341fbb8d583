/*
 * Matrix x few-vectors products for decode: y[t][r] = sum_c W[r][c] * x[t][c] for up to NT
 * tokens, W in its GGUF type, y and x f32 row-major.
 *
 * A group of `tpr` threads (32, 64 or 128; blockDim.x is 128) computes one row: the threads
 * stride over the row's units, each keeping one partial sum per token, then the group
 * reduces. Quantized types read activations quantized to q8_1 (quantize_q8_1 below) and
 * use the dp4a units of vecdot.cuh; F32/F16/BF16 read f32 activations 8 values at a time.
 * mmv_any is the reference form for any type and any width.
 */
#include "vecdot.cuh"

#define MV_THREADS 128

/* Reduces acc[t] over the `tpr` threads of each row group and writes y. */
template <int NT>
__device__ __forceinline__ void reduce_rows(float acc[NT], float *y, int row, int rows, int n,
                                            int tpr) {
  __shared__ float part[MV_THREADS / 32][NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = warp_sum(acc[t]);
  if (tpr == 32) {
    if (lane == 0 && row < rows) {
#pragma unroll
      for (int t = 0; t < NT; t++)
        if (t < n) y[(size_t)t * rows + row] = acc[t];
    }
    return;
  }
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < NT; t++) part[warp][t] = acc[t];
  }
  __syncthreads();
  const int wpr = tpr >> 5;
  if (lane == 0 && warp % wpr == 0 && row < rows) {
#pragma unroll
    for (int t = 0; t < NT; t++) {
      float s = 0.0f;
      for (int w = 0; w < wpr; w++) s += part[warp + w][t];
      if (t < n) y[(size_t)t * rows + row] = s;
    }
  }
}

/* Activations of `n` rows of `cols` values into q8_1; grid (kp / 128, n), 128 threads. */
extern "C" __global__ void quantize_q8_1(int8_t *xq, float2 *xd, const float *x, int n,
                                         int cols, int kp) {
  const int t = blockIdx.y;
  const int blk = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= n || blk * 32 >= kp) return;
  const int col = blk * 32 + lane;
  const float v = col < cols ? x[(size_t)t * cols + col] : 0.0f;
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
  const int sum = warp_sum_int(q);
  xq[(size_t)t * kp + col] = (int8_t)q;
  if (lane == 0) xd[(size_t)t * (kp / 32) + blk] = make_float2(d, d * (float)sum);
}
EXPORT_KERNEL(quantize_q8_1)

/* Row `row` (of `rows`) of W·x for up to NT tokens, by the `tpr` threads of its group. */
template <class U, int NT>
__device__ __forceinline__ void mmvq_row(float *y, const uint8_t *w, const int8_t *xq,
                                         const float2 *xd, int rows, int row, int cols,
                                         int row_bytes, int kp, int n, int tpr) {
  const int lt = threadIdx.x % tpr;
  const int units = cols / U::VALUES;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = 0.0f;
  if (row < rows) {
    const uint8_t *wr = w + (size_t)row * row_bytes;
    for (int u = lt; u < units; u += tpr) {
      U unit;
      unit.load(wr, u);
#pragma unroll
      for (int t = 0; t < NT; t++) {
        if (t < n) acc[t] += unit.dot(xq + (size_t)t * kp, xd + (size_t)t * (kp / 32), u);
      }
    }
  }
  reduce_rows<NT>(acc, y, row, rows, n, tpr);
}

template <class U, int NT>
__device__ __forceinline__ void mmvq(float *y, const uint8_t *w, const int8_t *xq,
                                     const float2 *xd, int rows, int cols, int row_bytes,
                                     int kp, int n, int tpr) {
  const int row = blockIdx.x * (MV_THREADS / tpr) + threadIdx.x / tpr;
  mmvq_row<U, NT>(y, w, xq, xd, rows, row, cols, row_bytes, kp, n, tpr);
}

/*
 * Up to three products of the same activations with weights of one type and width (q, k
 * and v; gate and up) in one launch: blocks [0, b0) compute W0, [b0, b0 + b1) W1, the rest
 * W2, each exactly as its own mmvq launch would.
 */
template <class U, int NT>
__device__ __forceinline__ void mmvq3(float *y0, float *y1, float *y2, const uint8_t *w0,
                                      const uint8_t *w1, const uint8_t *w2, int rows0,
                                      int rows1, int rows2, const int8_t *xq,
                                      const float2 *xd, int cols, int row_bytes, int kp, int n,
                                      int tpr) {
  const int rpc = MV_THREADS / tpr;
  const int b0 = (rows0 + rpc - 1) / rpc, b1 = (rows1 + rpc - 1) / rpc;
  int block = blockIdx.x;
  float *y = y0;
  const uint8_t *w = w0;
  int rows = rows0;
  if (block >= b0 + b1) {
    block -= b0 + b1, y = y2, w = w2, rows = rows2;
  } else if (block >= b0) {
    block -= b0, y = y1, w = w1, rows = rows1;
  }
  const int row = block * rpc + threadIdx.x / tpr;
  mmvq_row<U, NT>(y, w, xq, xd, rows, row, cols, row_bytes, kp, n, tpr);
}

#define MMVQ(NAME, UNIT, NT)                                                                    \
  extern "C" __global__ void __launch_bounds__(MV_THREADS)                                    \
      mmvq_##NAME##_##NT(float *y, const uint8_t *__restrict__ w,                            \
                         const int8_t *__restrict__ xq, const float2 *__restrict__ xd,        \
                         int rows, int cols, int row_bytes, int kp, int n, int tpr) {          \
    mmvq<UNIT, NT>(y, w, xq, xd, rows, cols, row_bytes, kp, n, tpr);                          \
  }                                                                                            \
  EXPORT_KERNEL(mmvq_##NAME##_##NT)

#define MMVQ3(NAME, UNIT, NT)                                                                   \
  extern "C" __global__ void __launch_bounds__(MV_THREADS) mmvq3_##NAME##_##NT(                \
      float *y0, float *y1, float *y2, const uint8_t *__restrict__ w0,                         \
      const uint8_t *__restrict__ w1, const uint8_t *__restrict__ w2, int rows0, int rows1,     \
      int rows2, const int8_t *__restrict__ xq, const float2 *__restrict__ xd,                  \
      int cols, int row_bytes, int kp, int n, int tpr) {                                       \
    mmvq3<UNIT, NT>(y0, y1, y2, w0, w1, w2, rows0, rows1, rows2, xq, xd, cols, row_bytes, kp,  \
                    n, tpr);                                                                   \
  }                                                                                            \
  EXPORT_KERNEL(mmvq3_##NAME##_##NT)

#define MMVQ_ALL(NAME, UNIT)                                                   \
  MMVQ(NAME, UNIT, 1) MMVQ(NAME, UNIT, 4) MMVQ(NAME, UNIT, 8) MMVQ3(NAME, UNIT, 1) \
      MMVQ3(NAME, UNIT, 4) MMVQ3(NAME, UNIT, 8)

MMVQ_ALL(q4_0, UnitQ4_0)
MMVQ_ALL(q4_1, UnitQ4_1)
MMVQ_ALL(q5_0, UnitQ5_0)
MMVQ_ALL(q5_1, UnitQ5_1)
MMVQ_ALL(q8_0, UnitQ8_0)
MMVQ_ALL(q2_k, UnitQ2_K)
MMVQ_ALL(q3_k, UnitQ3_K)
MMVQ_ALL(q4_k, UnitQ4_K)
MMVQ_ALL(q5_k, UnitQ5_K)
MMVQ_ALL(q6_k, UnitQ6_K)

/*
 * Gate and up products of the same activations in one pass: what two mmvq launches and
 * silu_mul compute, in one launch. The raw products go to gout and uout (as the two
 * launches would leave them), then y = silu(gate) * up (y may be gout).
 */
template <class U, int NT>
__device__ __forceinline__ void mmvq_gate_up(float *y, float *gout, float *uout,
                                             const uint8_t *wg, const uint8_t *wu,
                                             const int8_t *xq, const float2 *xd, int rows,
                                             int cols, int row_bytes, int kp, int n, int tpr) {
  __shared__ float part[MV_THREADS / 32][2][NT];
  const int row = blockIdx.x * (MV_THREADS / tpr) + threadIdx.x / tpr;
  const int lt = threadIdx.x % tpr;
  const int units = cols / U::VALUES;
  float g[NT], u[NT];
#pragma unroll
  for (int t = 0; t < NT; t++) g[t] = 0.0f, u[t] = 0.0f;
  if (row < rows) {
    const uint8_t *gr = wg + (size_t)row * row_bytes;
    const uint8_t *ur = wu + (size_t)row * row_bytes;
    for (int k = lt; k < units; k += tpr) {
      U ug, uu;
      ug.load(gr, k);
      uu.load(ur, k);
#pragma unroll
      for (int t = 0; t < NT; t++) {
        if (t < n) {
          const int8_t *q = xq + (size_t)t * kp;
          const float2 *d = xd + (size_t)t * (kp / 32);
          g[t] += ug.dot(q, d, k);
          u[t] += uu.dot(q, d, k);
        }
      }
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int t = 0; t < NT; t++) g[t] = warp_sum(g[t]), u[t] = warp_sum(u[t]);
  const int wpr = tpr >> 5;
  if (wpr > 1) {
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < NT; t++) part[warp][0][t] = g[t], part[warp][1][t] = u[t];
    }
    __syncthreads();
    if (lane == 0 && warp % wpr == 0) {
#pragma unroll
      for (int t = 0; t < NT; t++) {
        float sg = 0.0f, su = 0.0f;
        for (int w = 0; w < wpr; w++) sg += part[warp + w][0][t], su += part[warp + w][1][t];
        g[t] = sg, u[t] = su;
      }
    }
  }
  if (lane == 0 && warp % wpr == 0 && row < rows) {
#pragma unroll
    for (int t = 0; t < NT; t++)
      if (t < n) store_gate_up(y, gout, uout, (size_t)t * rows + row, g[t], u[t]);
  }
}

#define MMVQ_GU(NAME, UNIT, NT)                                                                 \
  extern "C" __global__ void __launch_bounds__(MV_THREADS) mmvq_gu_##NAME##_##NT(              \
      float *y, float *gout, float *uout, const uint8_t *__restrict__ wg,                      \
      const uint8_t *__restrict__ wu, const int8_t *__restrict__ xq,                           \
      const float2 *__restrict__ xd, int rows, int cols, int row_bytes, int kp, int n,         \
      int tpr) {                                                                               \
    mmvq_gate_up<UNIT, NT>(y, gout, uout, wg, wu, xq, xd, rows, cols, row_bytes, kp, n, tpr);  \
  }                                                                                            \
  EXPORT_KERNEL(mmvq_gu_##NAME##_##NT)

#define MMVQ_GU_ALL(NAME, UNIT) MMVQ_GU(NAME, UNIT, 1) MMVQ_GU(NAME, UNIT, 4) MMVQ_GU(NAME, UNIT, 8)

MMVQ_GU_ALL(q4_0, UnitQ4_0)
MMVQ_GU_ALL(q4_1, UnitQ4_1)
MMVQ_GU_ALL(q5_0, UnitQ5_0)
MMVQ_GU_ALL(q5_1, UnitQ5_1)
MMVQ_GU_ALL(q8_0, UnitQ8_0)
MMVQ_GU_ALL(q2_k, UnitQ2_K)
MMVQ_GU_ALL(q3_k, UnitQ3_K)
MMVQ_GU_ALL(q4_k, UnitQ4_K)
MMVQ_GU_ALL(q5_k, UnitQ5_K)
MMVQ_GU_ALL(q6_k, UnitQ6_K)

/* 8 weights of a float-typed row from column c (a multiple of 8). */
template <int TYPE>
__device__ __forceinline__ void load8(const uint8_t *row, int c, float v[8]) {
  if (TYPE == T_F32) {
    const float4 a = ld_f4((const float *)row + c);
    const float4 b = ld_f4((const float *)row + c + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const int4 h = ld_i128(row + 2 * c);
    const int words[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint16_t lo = (uint16_t)(words[i] & 0xFFFF);
      const uint16_t hi = (uint16_t)((uint32_t)words[i] >> 16);
      v[2 * i] = TYPE == T_F16 ? f16_to_f32(lo) : bf16_to_f32(lo);
      v[2 * i + 1] = TYPE == T_F16 ? f16_to_f32(hi) : bf16_to_f32(hi);
    }
  }
}

template <int TYPE, int NT>
__device__ __forceinline__ void mmv(float *y, const uint8_t *w, const float *x, int rows,
                                    int cols, int row_bytes, int n, int tpr) {
  const int row = blockIdx.x * (MV_THREADS / tpr) + threadIdx.x / tpr;
  const int lt = threadIdx.x % tpr;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t] = 0.0f;
  if (row < rows) {
    const uint8_t *wr = w + (size_t)row * row_bytes;
    for (int c = 8 * lt; c < cols; c += 8 * tpr) {
      float v[8];
      load8<TYPE>(wr, c, v);
#pragma unroll
      for (int t = 0; t < NT; t++) {
        if (t < n) {
          const float *xs = x + (size_t)t * cols + c;
          const float4 a = ld_f4(xs), b = ld_f4(xs + 4);
          acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x +
                    v[5] * b.y + v[6] * b.z + v[7] * b.w;
        }
      }
    }
  }
  reduce_rows<NT>(acc, y, row, rows, n, tpr);
}

#define MMV(NAME, TYPE, NT)                                                                     \
  extern "C" __global__ void __launch_bounds__(MV_THREADS)                                    \
      mmv_##NAME##_##NT(float *y, const uint8_t *__restrict__ w, const float *__restrict__ x, \
                        int rows, int cols,                                                    \
                        int row_bytes, int n, int tpr) {                                       \
    mmv<TYPE, NT>(y, w, x, rows, cols, row_bytes, n, tpr);                                    \
  }                                                                                            \
  EXPORT_KERNEL(mmv_##NAME##_##NT)

#define MMV_ALL(NAME, TYPE) MMV(NAME, TYPE, 1) MMV(NAME, TYPE, 4) MMV(NAME, TYPE, 8)

MMV_ALL(f32, T_F32)
MMV_ALL(f16, T_F16)
MMV_ALL(bf16, T_BF16)

/* Any type, any width: one warp per row, one token at a time. grid ceil(rows / 4). */
extern "C" __global__ void __launch_bounds__(MV_THREADS)
    mmv_any(float *y, const uint8_t *__restrict__ w, int type, const float *__restrict__ x,
            int rows, int cols,
            int row_bytes, int n) {
  const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const uint8_t *wr = w + (size_t)row * row_bytes;
  for (int t = 0; t < n; t++) {
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += dequant_value(type, wr, c) * x[(size_t)t * cols + c];
    s = warp_sum(s);
    if (lane == 0) y[(size_t)t * rows + row] = s;
  }
}
EXPORT_KERNEL(mmv_any)
