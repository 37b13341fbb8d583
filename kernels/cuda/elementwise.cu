/*
 * The small per-element and per-row operations of a transformer step: RMSNorm, RoPE (both
 * ggml layouts), SiLU and GELU gates, add, bias, scale, the Walsh-Hadamard rotation, row
 * gather, embedding lookup, argmax, f16 conversions. All activations are f32, row-major.
 */
#include "quant.cuh"
#include "rope.cuh"

/* One warp per group of `dim` values; grid ceil(groups / 4), 128 threads. `out` may be `x`. */
extern "C" __global__ void rms_norm_warp(float *out, const float *x, const float *w, int groups,
                                         int dim, float eps) {
  const int g = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (g >= groups) return;
  const float *xs = x + (size_t)g * dim;
  float s = 0.0f;
  for (int i = lane; i < dim; i += 32) s += xs[i] * xs[i];
  s = warp_sum(s);
  const float inv = rsqrtf(s / (float)dim + eps);
  float *os = out + (size_t)g * dim;
  for (int i = lane; i < dim; i += 32) os[i] = xs[i] * inv * w[i];
}
EXPORT_KERNEL(rms_norm_warp)

/* One block per group (wide rows); grid groups, 256 threads. `out` may be `x`. */
extern "C" __global__ void rms_norm_block(float *out, const float *x, const float *w,
                                          int groups, int dim, float eps) {
  __shared__ float scratch[32];
  const int g = blockIdx.x;
  if (g >= groups) return;
  const float *xs = x + (size_t)g * dim;
  const int stride = blockDim.x;
  float s = 0.0f;
  for (int i0 = threadIdx.x; i0 < dim; i0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE];
    load_strides(xs, i0, stride, dim, v);
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) {
      if (i0 + u * stride < dim) s += v[u] * v[u];
    }
  }
  s = block_sum(s, scratch);
  const float inv = rsqrtf(s / (float)dim + eps);
  float *os = out + (size_t)g * dim;
  for (int i0 = threadIdx.x; i0 < dim; i0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE], wv[STRIDES_AT_ONCE];
    load_strides(xs, i0, stride, dim, v);
    load_strides(w, i0, stride, dim, wv);
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) {
      if (i0 + u * stride < dim) os[i0 + u * stride] = v[u] * inv * wv[u];
    }
  }
}
EXPORT_KERNEL(rms_norm_block)

/*
 * Rotary embedding in place (rope.cuh): thread k turns pair k % (dim/2) of head
 * k / (dim/2). grid (ceil(heads * dim/2 / 128), rows), 128 threads.
 */
extern "C" __global__ void rope(float *x, const int *positions, const float *factors, int rows,
                                int heads, int dim, float base, float freq_scale,
                                float ext_factor, float corr_low, float corr_high, float mscale,
                                int norm) {
  const int t = blockIdx.y;
  const int half = dim / 2;
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows || k >= heads * half) return;
  const int h = k / half, i = k % half;
  const RopeSpec r = {base, freq_scale, ext_factor, corr_low, corr_high, mscale, factors, norm};
  float *p = x + ((size_t)t * heads + h) * dim + rope_first(i, norm);
  const int gap = rope_gap(dim, norm);
  rope_turn(p[0], p[gap], rope_angle((float)positions[t], i, dim, r), r, &p[0], &p[gap]);
}
EXPORT_KERNEL(rope)

/* out = silu(gate) * up over n values; `out` may be `gate`. */
extern "C" __global__ void silu_mul(float *out, const float *gate, const float *up, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}
EXPORT_KERNEL(silu_mul)

/* out = gelu(gate) * up over n values, GELU in ggml's tanh form; `out` may be `gate`. */
extern "C" __global__ void gelu_mul(float *out, const float *gate, const float *up, int n) {
  const float sqrt_2_over_pi = 0.79788456080286535588f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + tanhf(sqrt_2_over_pi * g * (1.0f + 0.044715f * g * g))) * up[i];
  }
}
EXPORT_KERNEL(gelu_mul)

/* out = a + b over n values; `out` may be `a`. */
extern "C" __global__ void add_f32(float *out, const float *a, const float *b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = a[i] + b[i];
  }
}
EXPORT_KERNEL(add_f32)

/* out = a + bias on each row of `cols` (n values in all); `out` may be `a`. */
extern "C" __global__ void add_bias(float *out, const float *a, const float *bias, int n,
                                    int cols) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = a[i] + bias[i % cols];
  }
}
EXPORT_KERNEL(add_bias)

/* out = a * factor over n values; `out` may be `a`. */
extern "C" __global__ void scale_f32(float *out, const float *a, float factor, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = a[i] * factor;
  }
}
EXPORT_KERNEL(scale_f32)

/*
 * Walsh-Hadamard rotation in place (kvRotation in src/backend/hadamard.ts): chunk
 * blockIdx.x of n values (a power of two, at most HADAMARD_MAX) becomes H_n x / sqrt(n):
 * scaled, then the CPU's butterflies in the CPU's order (kernels/cpu/isa_hadamard.c, ggml's),
 * so the two agree to the bit. grid chunks, HADAMARD_THREADS threads.
 */
#define HADAMARD_MAX 1024
extern "C" __global__ void hadamard_rows(float *x, int n) {
  __shared__ float s[HADAMARD_MAX];
  float *c = x + (size_t)blockIdx.x * n;
  const float norm = 1.0f / sqrtf((float)n);
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = c[i] * norm;
  __syncthreads();
  for (int h = 1; h < n; h *= 2) {
    for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
      const int j = p / h * 2 * h + p % h;
      const float a = s[j], b = s[j + h];
      s[j] = a + b;
      s[j + h] = a - b;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) c[i] = s[i];
}
EXPORT_KERNEL(hadamard_rows)

/* out[i] = a[idx[i]] for rows of `cols`; grid (ceil(cols / 256), n), 256 threads. */
extern "C" __global__ void gather_rows(float *out, const float *a, const int *idx, int n,
                                       int cols) {
  const int i = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || c >= cols) return;
  out[(size_t)i * cols + c] = a[(size_t)idx[i] * cols + c];
}
EXPORT_KERNEL(gather_rows)

/* out[i] = dequantized row ids[i] of `table`; grid (ceil(cols / 256), n), 256 threads. */
extern "C" __global__ void get_rows(float *out, const uint8_t *__restrict__ table, int type,
                                    const int *ids,
                                    int n, int cols, int row_bytes) {
  const int i = blockIdx.y;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || c >= cols) return;
  const uint8_t *row = table + (size_t)ids[i] * row_bytes;
  out[(size_t)i * cols + c] = dequant_value(type, row, c);
}
EXPORT_KERNEL(get_rows)

/* Rows of a weight as f16 for cuBLAS; grid rows, 256 threads. */
extern "C" __global__ void dequant_f16(uint16_t *out, const uint8_t *__restrict__ w, int type,
                                       int rows,
                                       int cols, int row_bytes) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  const uint8_t *row = w + (size_t)r * row_bytes;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out[(size_t)r * cols + c] = f32_to_f16(dequant_value(type, row, c));
  }
}
EXPORT_KERNEL(dequant_f16)

/*
 * Rows of activations as f16 for cuBLAS, each divided by scale[r]: 1 while the row's
 * largest magnitude is below 2^15, else the power of two that brings it there (f16 ends at
 * 65504; FFN-down inputs can pass it). A power of two moves only the exponent, so a scaled
 * row rounds exactly as it would unscaled, and unscaled rows are what they always were.
 * grid rows, 256 threads.
 */
extern "C" __global__ void f32_to_f16_rows(uint16_t *out, float *scale, const float *x, int rows,
                                           int cols) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  if (r >= rows) return;
  const float *row = x + (size_t)r * cols;
  const int stride = blockDim.x;
  float amax = 0.0f;
  for (int c0 = threadIdx.x; c0 < cols; c0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE];
    load_strides(row, c0, stride, cols, v);
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) amax = fmaxf(amax, fabsf(v[u]));
  }
  amax = warp_max(amax);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = amax;
  __syncthreads();
  amax = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0.0f;
  amax = warp_max(amax);
  int e = 0;
  if (amax >= 32768.0f && amax <= 3.0e38f) frexpf(amax, &e);
  const int k = e > 15 ? e - 15 : 0;
  const float inv = ldexpf(1.0f, -k);
  for (int c0 = threadIdx.x; c0 < cols; c0 += STRIDES_AT_ONCE * stride) {
    float v[STRIDES_AT_ONCE];
    load_strides(row, c0, stride, cols, v);
#pragma unroll
    for (int u = 0; u < STRIDES_AT_ONCE; u++) {
      if (c0 + u * stride < cols) out[(size_t)r * cols + c0 + u * stride] = f32_to_f16(v[u] * inv);
    }
  }
  if (threadIdx.x == 0) scale[r] = ldexpf(1.0f, k);
}
EXPORT_KERNEL(f32_to_f16_rows)

/*
 * y[r][c] *= scale[r] for the rows f32_to_f16_rows scaled (a row it left alone costs one
 * load); grid rows, 256 threads.
 */
extern "C" __global__ void unscale_rows(float *y, const float *scale, int rows, int cols) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  const float s = scale[r];
  if (s == 1.0f) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(size_t)r * cols + c] *= s;
}
EXPORT_KERNEL(unscale_rows)

/* Keeps (v, c) in (bv, bi) when it is larger, or equal at an earlier column. */
__device__ __forceinline__ void argmax_take(float v, int c, float &bv, int &bi) {
  if (v > bv || (v == bv && c < bi)) bv = v, bi = c;
}

/*
 * The block's best (value, column) from each thread's, left in thread 0's bv, bi (the
 * first column on ties). At most 256 threads.
 */
__device__ void block_argmax(float &bv, int &bi) {
  __shared__ float best_v[8];
  __shared__ int best_i[8];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    argmax_take(ov, oi, bv, bi);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) best_v[warp] = bv, best_i[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) argmax_take(best_v[w], best_i[w], bv, bi);
  }
}

/*
 * Index of the largest value of each row (the first on ties; NaN never wins), in two
 * launches: argmax_part, then argmax_final. One block per row walked a 151936-column row
 * in 593 dependent strides (235 us on an H200, a tenth of a small model's decode step);
 * parts of a row in parallel take a few.
 *
 * argmax_part: grid (parts, rows), 256 threads. Part p of row r covers columns
 * [p * span, (p + 1) * span) and leaves its best in pv/pi[r * parts + p] (bi = cols when it
 * has no candidate). Under token masks (structured output) masks[r] is the offset, in words
 * from `masks`, of row r's bitset (bit c of word c / 32: column c), or -1 for every column;
 * masks == nullptr: no row masked. Warp w of the block reads word w of each 256-column
 * stretch (one broadcast load); a lane whose bit is clear reads no float.
 */
__device__ __forceinline__ const unsigned *argmax_bits(const int *masks, int r) {
  return masks == nullptr || masks[r] < 0 ? nullptr : (const unsigned *)masks + masks[r];
}

extern "C" __global__ void argmax_part(float *pv, int *pi, const float *a, const int *masks,
                                       int rows, int cols, int span) {
  const int r = blockIdx.y, p = blockIdx.x;
  if (r >= rows) return;
  const float *row = a + (size_t)r * cols;
  const unsigned *bits = argmax_bits(masks, r);
  const int c0 = p * span, c1 = imin(cols, c0 + span);
  float bv = NEG_INF;
  int bi = cols;
  for (int c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    if (bits != nullptr && ((bits[c >> 5] >> (c & 31)) & 1u) == 0u) continue;
    argmax_take(row[c], c, bv, bi);
  }
  block_argmax(bv, bi);
  if (threadIdx.x == 0) pv[(size_t)r * gridDim.x + p] = bv, pi[(size_t)r * gridDim.x + p] = bi;
}
EXPORT_KERNEL(argmax_part)

/*
 * The row's best of its parts' bests (grid rows, 64 threads, parts <= 64). A masked row
 * with no number allowed gets its first allowed column (0 when none).
 */
extern "C" __global__ void argmax_final(int *out, const float *pv, const int *pi,
                                        const int *masks, int rows, int cols, int parts) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  float bv = NEG_INF;
  int bi = cols;
  if ((int)threadIdx.x < parts) {
    bv = pv[(size_t)r * parts + threadIdx.x], bi = pi[(size_t)r * parts + threadIdx.x];
  }
  block_argmax(bv, bi);
  if (threadIdx.x != 0) return;
  const unsigned *bits = argmax_bits(masks, r);
  if (bi >= cols && bits != nullptr) {
    for (int c = 0; c < cols; c++) {
      if ((bits[c >> 5] >> (c & 31)) & 1u) {
        bi = c;
        break;
      }
    }
  }
  out[r] = bi < cols ? bi : 0;
}
EXPORT_KERNEL(argmax_final)
