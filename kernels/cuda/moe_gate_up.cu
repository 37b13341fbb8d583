/*
 * The experts' gate and up products and the silu_mul after them in one launch, as
 * matvec.cu's mmvq_gu does for dense FFNs: a decode step of a MoE layer saves two launches
 * and one pass over the activations. Grid and slots as moe.cu's mmvq_e_*.
 */
#include "moe_slots.cuh"

/*
 * The gate and up products of mmvq_experts and silu_mul after them, in one launch (one
 * pass over the activations for both weights): the raw products go to gout and uout, as the
 * two launches leave them, then y = silu(gate) * up (y may be gout). Bitwise what the three
 * launches give.
 */
template <class U, int NT>
__device__ __forceinline__ void mmvq_experts_gate_up(float *y, float *gout, float *uout,
                                                     const uint8_t *wg, const uint8_t *wu,
                                                     int stride, const int8_t *xq,
                                                     const float2 *xd, const int *order,
                                                     const int *gexp, const int *gstart,
                                                     int rows, int cols, int row_bytes, int kp,
                                                     int per_slot, int k, int tpr) {
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
      const uint8_t *gr = wg + (size_t)e * stride + (size_t)row * row_bytes;
      const uint8_t *ur = wu + (size_t)e * stride + (size_t)row * row_bytes;
      for (int u = lt; u < units; u += tpr) {
        U ug, uu;
        ug.load(gr, u);
        uu.load(ur, u);
#pragma unroll
        for (int t = 0; t < NT; t++) {
          if (t < n) {
            const int8_t *q = xq + (size_t)xr[t] * kp;
            const float2 *d = xd + (size_t)xr[t] * (kp / 32);
            ag[t] += ug.dot(q, d, u);
            au[t] += uu.dot(q, d, u);
          }
        }
      }
    }
    sum_row_slots<NT>(ag, tpr);
    sum_row_slots<NT>(au, tpr);
    if (row_leader(tpr) && row < rows) {
#pragma unroll
      for (int t = 0; t < NT; t++) {
        if (t < n) {
          store_gate_up(y, gout, uout, (size_t)out[t] * rows + row, ag[t], au[t]);
        }
      }
    }
  }
}

#define MMVQ_E_GU(NAME, UNIT, NT)                                                               \
  extern "C" __global__ void __launch_bounds__(MOE_THREADS) mmvq_e_gu_##NAME##_##NT(           \
      float *y, float *gout, float *uout, const uint8_t *__restrict__ wg,                      \
      const uint8_t *__restrict__ wu, int stride, const int8_t *__restrict__ xq,               \
      const float2 *__restrict__ xd, const int *order, const int *gexp, const int *gstart,     \
      int rows, int cols, int row_bytes, int kp, int per_slot, int k, int tpr) {               \
    mmvq_experts_gate_up<UNIT, NT>(y, gout, uout, wg, wu, stride, xq, xd, order, gexp, gstart, \
                                   rows, cols, row_bytes, kp, per_slot, k, tpr);               \
  }                                                                                            \
  EXPORT_KERNEL(mmvq_e_gu_##NAME##_##NT)

#define MMVQ_E_GU_ALL(NAME, UNIT) MMVQ_E_GU(NAME, UNIT, 1) MMVQ_E_GU(NAME, UNIT, 8)

MMVQ_E_GU_ALL(q4_0, UnitQ4_0)
MMVQ_E_GU_ALL(q4_1, UnitQ4_1)
MMVQ_E_GU_ALL(q5_0, UnitQ5_0)
MMVQ_E_GU_ALL(q5_1, UnitQ5_1)
MMVQ_E_GU_ALL(q8_0, UnitQ8_0)
MMVQ_E_GU_ALL(q2_k, UnitQ2_K)
MMVQ_E_GU_ALL(q3_k, UnitQ3_K)
MMVQ_E_GU_ALL(q4_k, UnitQ4_K)
MMVQ_E_GU_ALL(q5_k, UnitQ5_K)
MMVQ_E_GU_ALL(q6_k, UnitQ6_K)
