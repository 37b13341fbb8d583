/*
 * Fused forms of op sequences the model issues back to back, so a decode step launches
 * fewer kernels. Each computes exactly what its unfused sequence computes (same thread to
 * element mapping, same reduction order, same formulas), so fused and unfused steps give
 * bitwise equal results:
 *   rms_norm_q8       rms_norm_block, then quantize_q8_1 of its output
 *   add_rms_norm      add_f32, then rms_norm_block of the sum
 *   add_rms_norm_q8   the same, then quantize_q8_1
 *   rms_norm_rope     rms_norm_warp per head in place, then rope (either layout)
 */
#include "common.cuh"
#include "rope.cuh"

#define NORM_THREADS 256

/*
 * One block of 256 threads per row of `dim`: optionally sum = a + b first (written to
 * `sum`, which may be `a`), then out = norm(sum) * w, then optionally the q8_1 form of out
 * (kp columns, zero past dim). A warp's 32 lanes cover 32 consecutive columns in each
 * stride of 256, which is one q8_1 block.
 *
 * Each pass takes STRIDES_AT_ONCE strides (common.cuh), every load issued before any use;
 * the values, their order of summation and the thread owning each are those of a
 * one-stride loop.
 */
template <bool ADD, bool Q8>
__device__ __forceinline__ void norm_row(float *sum, float *out, int8_t *xq, float2 *xd,
                                         const float *a, const float *b, const float *w,
                                         int rows, int dim, int kp, float eps) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  if (r >= rows) return;
  const float *xs = a + (size_t)r * dim;
  float *hs = ADD ? sum + (size_t)r * dim : nullptr;
  const float *bs = ADD ? b + (size_t)r * dim : nullptr;
  const int stride = blockDim.x;
  float s = 0.0f;
  for (int i0 = threadIdx.x; i0 < dim; i0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE], bv[STRIDES_AT_ONCE];
    load_strides(xs, i0, stride, dim, v);
    if (ADD) {
      load_strides(bs, i0, stride, dim, bv);
#pragma unroll
      for (int u = 0; u < STRIDES_AT_ONCE; u++) v[u] = v[u] + bv[u];
    }
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) {
      const int i = i0 + u * stride;
      if (i < dim) {
        if (ADD) hs[i] = v[u];
        s += v[u] * v[u];
      }
    }
  }
  s = block_sum(s, scratch);
  const float inv = rsqrtf(s / (float)dim + eps);
  const float *src = ADD ? hs : xs;
  float *os = out + (size_t)r * dim;
  const int end = Q8 ? kp : dim;
  const int lane = threadIdx.x & 31;
  for (int i0 = threadIdx.x; i0 < end; i0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE], wv[STRIDES_AT_ONCE];
    load_strides(src, i0, stride, dim, v);
    load_strides(w, i0, stride, dim, wv);
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) v[u] = i0 + u * stride < dim ? v[u] * inv * wv[u] : 0.0f;
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) {
      const int i = i0 + u * stride;
      if (i < dim) os[i] = v[u];
      // A stride is whole warps, so every lane of a warp agrees on `i < end`.
      if (!Q8 || i >= end) continue;
      const float amax = warp_max(fabsf(v[u]));
      const float d = amax / 127.0f;
      const int q = amax == 0.0f ? 0 : (int)roundf(v[u] / d);
      const int qsum = warp_sum_int(q);
      xq[(size_t)r * kp + i] = (int8_t)q;
      if (lane == 0) xd[(size_t)r * (kp / 32) + i / 32] = make_float2(d, d * (float)qsum);
    }
  }
}

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    rms_norm_q8(float *out, int8_t *xq, float2 *xd, const float *x, const float *w, int rows,
                int dim, int kp, float eps) {
  norm_row<false, true>(nullptr, out, xq, xd, x, nullptr, w, rows, dim, kp, eps);
}
EXPORT_KERNEL(rms_norm_q8)

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    add_rms_norm(float *sum, float *out, const float *a, const float *b, const float *w,
                 int rows, int dim, float eps) {
  norm_row<true, false>(sum, out, nullptr, nullptr, a, b, w, rows, dim, 0, eps);
}
EXPORT_KERNEL(add_rms_norm)

extern "C" __global__ void __launch_bounds__(NORM_THREADS)
    add_rms_norm_q8(float *sum, float *out, int8_t *xq, float2 *xd, const float *a,
                    const float *b, const float *w, int rows, int dim, int kp, float eps) {
  norm_row<true, true>(sum, out, xq, xd, a, b, w, rows, dim, kp, eps);
}
EXPORT_KERNEL(add_rms_norm_q8)

/*
 * Per-head RMSNorm in place followed by RoPE at the row's position (rope.cuh), in either
 * layout: one warp per (row, head), grid ceil(rows * heads / 4), 128 threads.
 */
extern "C" __global__ void rms_norm_rope(float *x, const float *w, const int *positions,
                                         const float *factors, int rows, int heads, int dim,
                                         float eps, float base, float freq_scale,
                                         float ext_factor, float corr_low, float corr_high,
                                         float mscale, int norm) {
  const int g = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (g >= rows * heads) return;
  float *xs = x + (size_t)g * dim;
  float s = 0.0f;
  for (int i = lane; i < dim; i += 32) s += xs[i] * xs[i];
  s = warp_sum(s);
  const float inv = rsqrtf(s / (float)dim + eps);
  const RopeSpec r = {base, freq_scale, ext_factor, corr_low, corr_high, mscale, factors, norm};
  const float pos = (float)positions[g / heads];
  const int gap = rope_gap(dim, norm);
  for (int i = lane; i < dim / 2; i += 32) {
    const int j = rope_first(i, norm);
    const float a = xs[j] * inv * w[j];
    const float b = xs[j + gap] * inv * w[j + gap];
    rope_turn(a, b, rope_angle(pos, i, dim, r), r, &xs[j], &xs[j + gap]);
  }
}
EXPORT_KERNEL(rms_norm_rope)
