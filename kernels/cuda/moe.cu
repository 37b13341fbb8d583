/*
 * Mixture-of-experts kernels, the expert indices read and written on the device (no host
 * round trip, so a decode step with experts is captured as a CUDA graph like any other):
 *
 * - moe_route: llama.cpp's softmax gating per row (kernels/cpu/moe.c's nk_moe_route):
 *   softmax (its sum in double, over the block), the k best experts in the order of
 *   ggml's argsort (libstdc++'s std::sort, moe_sort.cuh, where ties make it matter), their
 *   weights renormalised. ids are written as floats. For one row it can also write
 *   moe_group's grouping of them (each chosen expert its own group), a launch fewer per
 *   layer of a decode step.
 * - moe_group: the (token, slot) rows grouped by the expert they chose, in slot order.
 * - mmvq_e_* / mmv_e_* / mmv_any_e: the experts' products, one grid row of blocks per
 *   chosen expert: its weights stream once for all the rows that chose it, NT rows at a
 *   time, with the units and reductions of matvec.cu (mmvq_e_gu_*: gate and up fused
 *   with their silu_mul).
 * - moe_combine: the weighted sum in slot order, every product rounded before its sum.
 */
#include "moe_sort.cuh"
#include "moe_slots.cuh"

#define MOE_MAX_EXPERTS 512
#define MOE_GROUP_THREADS 512
#define WEIGHT_SUM_FLOOR 6.103515625e-5f

/* Sum over a block of MOE_THREADS, in double; every thread gets the total. */
__device__ __forceinline__ double block_sum_f64(double v, double *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < MOE_THREADS / 32; w++) t += scratch[w];
  return t;
}

/*
 * Grid (n_rows), MOE_THREADS threads, each for experts tid, tid + MOE_THREADS, ... . An
 * expert's place in the descending order is the number of experts above it; only where
 * two of the first k + 1 places hold equal values does std::sort's own order decide
 * (moe_sort.cuh, one thread), as ggml's argsort leaves tied experts.
 */
extern "C" __global__ void __launch_bounds__(MOE_THREADS)
    moe_route(float *ids, float *weights, const float *logits, int n_rows, int n_experts, int k,
              int normalize, int *gorder, int *gexp, int *gstart) {
  __shared__ float p[MOE_MAX_EXPERTS];
  __shared__ int order[MOE_MAX_EXPERTS];
  __shared__ float maxes[MOE_THREADS / 32];
  __shared__ double sums[MOE_THREADS / 32];
  __shared__ int tied;
  __shared__ float denom;
  const int t = blockIdx.x, tid = threadIdx.x;
  if (t >= n_rows) return;
  const float *l = logits + (size_t)t * n_experts;
  float max = NEG_INF;
  for (int e = tid; e < n_experts; e += MOE_THREADS) max = max > l[e] ? max : l[e];
  max = warp_max(max);
  if (tid == 0) tied = 0;
  if ((tid & 31) == 0) maxes[tid >> 5] = max;
  __syncthreads();
  for (int w = 0; w < MOE_THREADS / 32; w++) max = max > maxes[w] ? max : maxes[w];
  double part = 0;
  for (int e = tid; e < n_experts; e += MOE_THREADS) {
    p[e] = expf(l[e] - max);
    part += (double)p[e];
  }
  const float inv = (float)(1.0 / block_sum_f64(part, sums));
  for (int e = tid; e < n_experts; e += MOE_THREADS) p[e] = __fmul_rn(p[e], inv);
  __syncthreads();
  for (int e = tid; e < n_experts; e += MOE_THREADS) {
    int above = 0, same = 0;
    for (int f = 0; f < n_experts; f++) {
      above += p[f] > p[e];
      same += f != e && p[f] == p[e];
    }
    if (above < k && same > 0) tied = 1;
    if (above < k) order[above] = e;
  }
  __syncthreads();
  if (tid == 0) {
    if (tied) moe_argsort_desc(order, n_experts, p);
    double chosen = 0;
    for (int j = 0; j < k; j++) chosen += (double)p[order[j]];
    const float d = (float)chosen;
    denom = d < WEIGHT_SUM_FLOOR ? WEIGHT_SUM_FLOOR : d;
  }
  __syncthreads();
  for (int j = tid; j < k; j += MOE_THREADS) {
    ids[(size_t)t * k + j] = (float)order[j];
    weights[(size_t)t * k + j] = normalize ? __fdiv_rn(p[order[j]], denom) : p[order[j]];
  }
  /* moe_group's output for one row's k distinct experts: groups by ascending expert, one
   * slot each. */
  if (gorder != nullptr && n_rows == 1) {
    for (int j = tid; j < k; j += MOE_THREADS) {
      int rank = 0;
      for (int i = 0; i < k; i++) rank += order[i] < order[j];
      gexp[rank] = order[j];
      gstart[rank] = rank;
      gorder[rank] = j;
    }
    if (tid == 0) gstart[k] = k;
  }
}
EXPORT_KERNEL(moe_route)

/*
 * Grid (1), MOE_GROUP_THREADS threads. order[i]: the slots by chosen expert (stable); group
 * g < groups has expert gexp[g] (-1: no group) and slots [gstart[g], gstart[g + 1]) of
 * order. The slots are counted by shared atomics, thread 0 turns the counts into starts and
 * groups (a walk over the experts alone), then each warp places the slots of its experts,
 * 32 slots at a time, a ballot giving each its rank among them. One thread walking every
 * slot twice took 362 us for a 512-token prefill's 4096 slots on an H200.
 */
extern "C" __global__ void __launch_bounds__(MOE_GROUP_THREADS)
    moe_group(int *order, int *gexp, int *gstart, const float *ids, int slots, int n_experts,
              int groups) {
  __shared__ int start[MOE_MAX_EXPERTS + 1];
  const int tid = threadIdx.x, lane = tid & 31, nw = blockDim.x >> 5;
  for (int e = tid; e <= n_experts; e += blockDim.x) start[e] = 0;
  __syncthreads();
  for (int s = tid; s < slots; s += blockDim.x) atomicAdd(&start[(int)ids[s] + 1], 1);
  __syncthreads();
  if (tid == 0) {
    int g = 0;
    for (int e = 0; e < n_experts; e++) {
      if (start[e + 1] > 0 && g < groups) {
        gexp[g] = e;
        gstart[g] = start[e];
        g++;
      }
      start[e + 1] += start[e];
    }
    for (; g < groups; g++) gexp[g] = -1, gstart[g] = slots;
    gstart[groups] = slots;
  }
  __syncthreads();
  for (int e = tid >> 5; e < n_experts; e += nw) {
    int at = start[e];
    if (start[e + 1] == at) continue;
    for (int s0 = 0; s0 < slots; s0 += 32) {
      const int s = s0 + lane;
      const bool mine = s < slots && (int)ids[s] == e;
      const unsigned m = __ballot_sync(0xffffffffu, mine);
      if (mine) order[at + __popc(m & ((1u << lane) - 1u))] = s;
      at += __popc(m);
    }
  }
}
EXPORT_KERNEL(moe_group)

/*
 * Grid (ceil(rows / (MOE_THREADS / tpr)), groups), MOE_THREADS threads: rows of group
 * blockIdx.y's expert for all its slots, NT at a time, on q8_1 activations; y = wg x.
 * GU: the gate (wg) and up (wu) products and the silu_mul after them in one pass over the
 * activations, as matvec.cu's mmvq_gu for dense FFNs: the raw products go to gout and uout,
 * as the two launches leave them, then y = silu(gate) * up (y may be gout). Bitwise what
 * the three launches give.
 */
template <class U, int NT, bool GU>
__device__ __forceinline__ void mmvq_experts(float *y, float *gout, float *uout,
                                             const uint8_t *wg, const uint8_t *wu, int stride,
                                             const int8_t *xq, const float2 *xd,
                                             const int *order, const int *gexp,
                                             const int *gstart, int rows, int cols,
                                             int row_bytes, int kp, int per_slot, int k,
                                             int tpr) {
  const int g = blockIdx.y;
  const int e = gexp[g];
  if (e < 0) return;
  const int row = blockIdx.x * (MOE_THREADS / tpr) + threadIdx.x / tpr;
  const int lt = threadIdx.x % tpr;
  const int units = cols / U::VALUES;
  for (int s0 = gstart[g]; s0 < gstart[g + 1]; s0 += NT) {
    const int n = imin(NT, gstart[g + 1] - s0);
    int out[NT], xr[NT];
    slots_of<NT>(order, s0, n, per_slot, k, out, xr);
    float ag[NT], au[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) ag[t] = 0.0f, au[t] = 0.0f;
    if (row < rows) {
      const size_t at = (size_t)e * stride + (size_t)row * row_bytes;
      const uint8_t *gr = wg + at, *ur = GU ? wu + at : nullptr;
      for (int u = lt; u < units; u += tpr) {
        U ug, uu;
        ug.load(gr, u);
        if (GU) uu.load(ur, u);
#pragma unroll
        for (int t = 0; t < NT; t++) {
          if (t < n) {
            const int8_t *q = xq + (size_t)xr[t] * kp;
            const float2 *d = xd + (size_t)xr[t] * (kp / 32);
            ag[t] += ug.dot(q, d, u);
            if (GU) au[t] += uu.dot(q, d, u);
          }
        }
      }
    }
    if (!GU) {
      reduce_slots<NT>(ag, y, out, row, rows, n, tpr);
      continue;
    }
    sum_row_slots<NT>(ag, n, tpr);
    sum_row_slots<NT>(au, n, tpr);
    if (row_leader(tpr) && row < rows) {
#pragma unroll
      for (int t = 0; t < NT; t++)
        if (t < n) store_gate_up(y, gout, uout, (size_t)out[t] * rows + row, ag[t], au[t]);
    }
  }
}

#define MMVQ_E(NAME, UNIT, NT)                                                                  \
  extern "C" __global__ void __launch_bounds__(MOE_THREADS) mmvq_e_##NAME##_##NT(              \
      float *y, const uint8_t *__restrict__ w, int stride, const int8_t *__restrict__ xq,      \
      const float2 *__restrict__ xd,                                                           \
      const int *order, const int *gexp, const int *gstart, int rows, int cols, int row_bytes, \
      int kp, int per_slot, int k, int tpr) {                                                  \
    mmvq_experts<UNIT, NT, false>(y, nullptr, nullptr, w, nullptr, stride, xq, xd, order,      \
                                  gexp, gstart, rows, cols, row_bytes, kp, per_slot, k, tpr);  \
  }                                                                                            \
  EXPORT_KERNEL(mmvq_e_##NAME##_##NT)                                                          \
  extern "C" __global__ void __launch_bounds__(MOE_THREADS) mmvq_e_gu_##NAME##_##NT(           \
      float *y, float *gout, float *uout, const uint8_t *__restrict__ wg,                      \
      const uint8_t *__restrict__ wu, int stride, const int8_t *__restrict__ xq,               \
      const float2 *__restrict__ xd, const int *order, const int *gexp, const int *gstart,     \
      int rows, int cols, int row_bytes, int kp, int per_slot, int k, int tpr) {               \
    mmvq_experts<UNIT, NT, true>(y, gout, uout, wg, wu, stride, xq, xd, order, gexp, gstart,   \
                                 rows, cols, row_bytes, kp, per_slot, k, tpr);                 \
  }                                                                                            \
  EXPORT_KERNEL(mmvq_e_gu_##NAME##_##NT)

#define MMVQ_E_ALL(NAME, UNIT) MMVQ_E(NAME, UNIT, 1) MMVQ_E(NAME, UNIT, 8)

MMVQ_E_ALL(q4_0, UnitQ4_0)
MMVQ_E_ALL(q4_1, UnitQ4_1)
MMVQ_E_ALL(q5_0, UnitQ5_0)
MMVQ_E_ALL(q5_1, UnitQ5_1)
MMVQ_E_ALL(q8_0, UnitQ8_0)
MMVQ_E_ALL(q2_k, UnitQ2_K)
MMVQ_E_ALL(q3_k, UnitQ3_K)
MMVQ_E_ALL(q4_k, UnitQ4_K)
MMVQ_E_ALL(q5_k, UnitQ5_K)
MMVQ_E_ALL(q6_k, UnitQ6_K)

/* 8 weights of a float-typed row from column c (a multiple of 8). */
template <int TYPE>
__device__ __forceinline__ void load8_e(const uint8_t *row, int c, float v[8]) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    v[i] = TYPE == T_F32 ? ((const float *)row)[c + i]
         : TYPE == T_F16 ? ld_f16(row + 2 * (c + i))
                         : bf16_to_f32(ld_u16(row + 2 * (c + i)));
  }
}

/* The float-typed experts' products on f32 activations, laid out as mmvq_experts. */
template <int TYPE, int NT>
__device__ __forceinline__ void mmv_experts(float *y, const uint8_t *w, int stride,
                                            const float *x, const int *order, const int *gexp,
                                            const int *gstart, int rows, int cols,
                                            int row_bytes, int per_slot, int k, int tpr) {
  const int g = blockIdx.y;
  const int e = gexp[g];
  if (e < 0) return;
  const uint8_t *we = w + (size_t)e * stride;
  const int row = blockIdx.x * (MOE_THREADS / tpr) + threadIdx.x / tpr;
  const int lt = threadIdx.x % tpr;
  for (int s0 = gstart[g]; s0 < gstart[g + 1]; s0 += NT) {
    const int n = imin(NT, gstart[g + 1] - s0);
    int out[NT], xr[NT];
    slots_of<NT>(order, s0, n, per_slot, k, out, xr);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (row < rows) {
      const uint8_t *wr = we + (size_t)row * row_bytes;
      for (int c = 8 * lt; c < cols; c += 8 * tpr) {
        float v[8];
        load8_e<TYPE>(wr, c, v);
#pragma unroll
        for (int t = 0; t < NT; t++) {
          if (t < n) {
            const float *xs = x + (size_t)xr[t] * cols + c;
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++) s += v[i] * xs[i];
            acc[t] += s;
          }
        }
      }
    }
    reduce_slots<NT>(acc, y, out, row, rows, n, tpr);
  }
}

#define MMV_E(NAME, TYPE, NT)                                                                   \
  extern "C" __global__ void __launch_bounds__(MOE_THREADS) mmv_e_##NAME##_##NT(               \
      float *y, const uint8_t *__restrict__ w, int stride, const float *__restrict__ x,        \
      const int *order,                                                                        \
      const int *gexp, const int *gstart, int rows, int cols, int row_bytes, int per_slot,     \
      int k, int tpr) {                                                                        \
    mmv_experts<TYPE, NT>(y, w, stride, x, order, gexp, gstart, rows, cols, row_bytes,        \
                          per_slot, k, tpr);                                                   \
  }                                                                                            \
  EXPORT_KERNEL(mmv_e_##NAME##_##NT)

#define MMV_E_ALL(NAME, TYPE) MMV_E(NAME, TYPE, 1) MMV_E(NAME, TYPE, 8)

MMV_E_ALL(f32, T_F32)
MMV_E_ALL(f16, T_F16)
MMV_E_ALL(bf16, T_BF16)

/* Any type, any width: one warp per row, one slot at a time. Grid (ceil(rows / 4), groups). */
extern "C" __global__ void __launch_bounds__(MOE_THREADS)
    mmv_any_e(float *y, const uint8_t *__restrict__ w, int stride, int type,
              const float *__restrict__ x, const int *order,
              const int *gexp, const int *gstart, int rows, int cols, int row_bytes,
              int per_slot, int k) {
  const int g = blockIdx.y;
  const int e = gexp[g];
  const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (e < 0 || row >= rows) return;
  const uint8_t *wr = w + (size_t)e * stride + (size_t)row * row_bytes;
  for (int i = gstart[g]; i < gstart[g + 1]; i++) {
    const int slot = order[i];
    const float *xs = x + (size_t)(per_slot ? slot : slot / k) * cols;
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += dequant_value(type, wr, c) * xs[c];
    s = warp_sum(s);
    if (lane == 0) y[(size_t)slot * rows + row] = s;
  }
}
EXPORT_KERNEL(mmv_any_e)

/* out[t] = ((w0 e0 + w1 e1) + w2 e2) + ...; grid (ceil(cols / 256), n_tokens), 256 threads. */
extern "C" __global__ void moe_combine(float *out, const float *experts, const float *weights,
                                       int n_tokens, int k, int cols) {
  const int t = blockIdx.y;
  const int c = blockIdx.x * 256 + threadIdx.x;
  if (t >= n_tokens || c >= cols) return;
  const float *w = weights + (size_t)t * k;
  const float *e = experts + (size_t)t * k * cols + c;
  float acc = __fmul_rn(w[0], e[0]);
  for (int j = 1; j < k; j++) acc = __fadd_rn(acc, __fmul_rn(w[j], e[(size_t)j * cols]));
  out[(size_t)t * cols + c] = acc;
}
EXPORT_KERNEL(moe_combine)
