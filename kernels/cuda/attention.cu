/*
 * Attention over the paged KV cache (kv_cache.cuh; kv_store.cu writes it), of any cache
 * type: quantized rows are dequantized as they are loaded. A step's rows carry their
 * position (`positions`) and sequence (`row_seq`, -1 for a row of no sequence), and
 * sequence s's block table is tables[s * table_stride ...].
 *
 * Attention is split-K flash-decoding: attn_split_* computes, for one (row, head, split),
 * the unnormalised softmax-weighted sum of V over its share of the positions the row sees
 * along with the running max and normaliser; attn_combine merges the splits. The number of
 * splits is a launch parameter chosen from shapes alone (never from positions), so a
 * captured CUDA graph stays valid as sequences grow.
 *
 * A row at position p sees positions 0..p, or under a sliding window of `window` (> 0)
 * positions p - window + 1..p (llama.cpp's SWA mask, Gemma 3's local layers).
 */
#include "kv_cache.cuh"

#define ATTN_THREADS 128
#define ATTN_WARPS (ATTN_THREADS / 32)
#define MAX_HEAD_DIM 256

/* The first position a row at `pos` sees (window 0: no window). */
__device__ __forceinline__ int attn_first(int pos, int window) {
  return window > 0 ? imax(0, pos - window + 1) : 0;
}

/*
 * grid (heads, rows, splits), 128 threads. The positions a row sees are cut into `splits`
 * equal shares; each warp walks every 4th position of its block's share; a lane holds
 * head_dim / 32 elements, lane + 32 j for j = 0.. (head_dim a multiple of 32, at most 256):
 * value j of each of the row's 32-value blocks.
 * Output per (row, head, split) s: ml[2s] = max score, ml[2s+1] = sum of exp(score - max),
 * acc[s * head_dim ...] = sum of exp(score - max) * V.
 */
template <typename KV>
__device__ __forceinline__ void attn_split(float *acc_out, float *ml_out, const float *q,
                                           const uint8_t *kc, const uint8_t *vc,
                                           const int *positions, const int *row_seq,
                                           const int *tables, int table_stride, int heads,
                                           int kv_heads, int head_dim, int block_size,
                                           int splits, float scale, int window) {
  __shared__ float sm_m[ATTN_WARPS], sm_l[ATTN_WARPS];
  __shared__ float sm_acc[ATTN_WARPS][MAX_HEAD_DIM];
  const int h = blockIdx.x, t = blockIdx.y, s = blockIdx.z;
  const int seq = row_seq[t];
  if (seq < 0) return;
  const int first = attn_first(positions[t], window), len = positions[t] + 1;
  const int chunk = (len - first + splits - 1) / splits;
  const int p0 = first + s * chunk, p1 = imin(len, p0 + chunk);
  const int kvh = h / (heads / kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dpl = head_dim >> 5;
  const int *table = tables + (size_t)seq * table_stride;

  float qv[8], acc[8];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    qv[j] = j < dpl ? q[((size_t)t * heads + h) * head_dim + lane + 32 * j] * scale : 0.0f;
    acc[j] = 0.0f;
  }
  float m = NEG_INF, l = 0.0f;
  for (int p = p0 + warp; p < p1; p += ATTN_WARPS) {
    const size_t slot = kv_slot(table, p, block_size);
    const uint8_t *kr = kv_row<KV>(kc, slot, kv_heads, kvh, head_dim);
    const uint8_t *vr = kv_row<KV>(vc, slot, kv_heads, kvh, head_dim);
    float d = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (j < dpl) d += qv[j] * KV::load(kr, lane + 32 * j);
    d = warp_sum(d);
    const float mn = fmaxf(m, d);
    const float c = expf(m - mn), e = expf(d - mn);
    l = l * c + e;
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (j < dpl) acc[j] = acc[j] * c + e * KV::load(vr, lane + 32 * j);
    m = mn;
  }
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
#pragma unroll
  for (int j = 0; j < 8; j++)
    if (j < dpl) sm_acc[warp][lane + 32 * j] = acc[j];
  __syncthreads();
  if (warp != 0) return;
  float mm = NEG_INF;
  for (int w = 0; w < ATTN_WARPS; w++) mm = fmaxf(mm, sm_m[w]);
  float ll = 0.0f, out[8];
#pragma unroll
  for (int j = 0; j < 8; j++) out[j] = 0.0f;
  for (int w = 0; w < ATTN_WARPS; w++) {
    const float f = sm_m[w] == NEG_INF ? 0.0f : expf(sm_m[w] - mm);
    ll += sm_l[w] * f;
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (j < dpl) out[j] += sm_acc[w][lane + 32 * j] * f;
  }
  const size_t idx = ((size_t)t * heads + h) * splits + s;
  if (lane == 0) ml_out[2 * idx] = mm, ml_out[2 * idx + 1] = ll;
#pragma unroll
  for (int j = 0; j < 8; j++)
    if (j < dpl) acc_out[idx * head_dim + lane + 32 * j] = out[j];
}

#define ATTN_SPLIT(name, KV)                                                               \
  extern "C" __global__ void __launch_bounds__(ATTN_THREADS)                               \
      name(float *acc, float *ml, const float *q, const uint8_t *kc, const uint8_t *vc,    \
           const int *positions, const int *row_seq, const int *tables, int table_stride,  \
           int heads, int kv_heads, int head_dim, int block_size, int splits, float scale, \
           int window) {                                                                   \
    attn_split<KV>(acc, ml, q, kc, vc, positions, row_seq, tables, table_stride, heads,    \
                   kv_heads, head_dim, block_size, splits, scale, window);                 \
  }                                                                                        \
  EXPORT_KERNEL(name)

ATTN_SPLIT(attn_split_f32, KvF32)
ATTN_SPLIT(attn_split_f16, KvF16)
ATTN_SPLIT(attn_split_q8_0, KvQ8_0)
ATTN_SPLIT(attn_split_q4_0, KvQ4_0)

/*
 * Causal attention for the prefill rows of one sequence: grid (heads, ceil(row_count / 16)),
 * 128 threads; rows row_start.. of the step, `table` the sequence's block table. A block
 * takes 16 consecutive rows (4 per warp) of one head and walks the cache in tiles of 32
 * positions staged in shared memory (K padded against bank conflicts), from the first
 * position any of its rows sees: lane j scores position j of the tile, then the warp folds
 * the tile into each row's running softmax, lanes now holding head dimensions. Positions a
 * row does not see are masked, and a row skips the tiles that hold none it sees, so every
 * tile it folds has a finite score. head_dim a multiple of 32, at most 128.
 */
#define PF_ROWS 16
#define PF_TILE 32
#define PF_MAX_DIM 128

template <typename KV>
__device__ __forceinline__ void attn_prefill(float *out, const float *q, const uint8_t *kc,
                                             const uint8_t *vc, const int *positions,
                                             const int *table, int row_start, int row_count,
                                             int heads, int kv_heads, int head_dim,
                                             int block_size, float scale, int window) {
  __shared__ float qs[PF_ROWS][PF_MAX_DIM];
  __shared__ float ks[PF_TILE][PF_MAX_DIM + 1];
  __shared__ float vs[PF_TILE][PF_MAX_DIM];
  const int h = blockIdx.x;
  const int r0 = blockIdx.y * PF_ROWS;
  const int kvh = h / (heads / kv_heads);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dpl = head_dim >> 5;
  const int nrows = imin(PF_ROWS, row_count - r0);

  int last = 0, start = 0x7fffffff;
  for (int i = 0; i < nrows; i++) {
    const int p = positions[row_start + r0 + i];
    last = imax(last, p);
    start = imin(start, attn_first(p, window));
  }
  for (int e = threadIdx.x; e < PF_ROWS * head_dim; e += blockDim.x) {
    const int i = e / head_dim, d = e % head_dim;
    qs[i][d] = i < nrows ? q[((size_t)(row_start + r0 + i) * heads + h) * head_dim + d] * scale
                         : 0.0f;
  }
  float m[4], l[4], acc[4][4];
  int pos[4], first[4];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const int i = warp * 4 + k;
    pos[k] = i < nrows ? positions[row_start + r0 + i] : -1;
    first[k] = attn_first(pos[k], window);
    m[k] = NEG_INF, l[k] = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; j++) acc[k][j] = 0.0f;
  }
  for (int t0 = start; t0 <= last; t0 += PF_TILE) {
    __syncthreads();
    for (int e = threadIdx.x; e < PF_TILE * head_dim; e += blockDim.x) {
      const int j = e / head_dim, d = e % head_dim;
      float kv = 0.0f, vv = 0.0f;
      if (t0 + j <= last) {
        const size_t slot = kv_slot(table, t0 + j, block_size);
        kv = KV::load(kv_row<KV>(kc, slot, kv_heads, kvh, head_dim), d);
        vv = KV::load(kv_row<KV>(vc, slot, kv_heads, kvh, head_dim), d);
      }
      ks[j][d] = kv;
      vs[j][d] = vv;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; k++) {
      if (pos[k] < t0 || first[k] >= t0 + PF_TILE) continue;
      const float *qr = qs[warp * 4 + k];
      float score = 0.0f;
      for (int d = 0; d < head_dim; d++) score += qr[d] * ks[lane][d];
      if (t0 + lane > pos[k] || t0 + lane < first[k]) score = NEG_INF;
      const float mn = fmaxf(m[k], warp_max(score));
      const float c = expf(m[k] - mn);
      const float p = score == NEG_INF ? 0.0f : expf(score - mn);
      l[k] = l[k] * c + warp_sum(p);
#pragma unroll
      for (int j = 0; j < 4; j++) acc[k][j] *= c;
      for (int jj = 0; jj < PF_TILE; jj++) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int j = 0; j < 4; j++)
          if (j < dpl) acc[k][j] += pj * vs[jj][lane + 32 * j];
      }
      m[k] = mn;
    }
  }
#pragma unroll
  for (int k = 0; k < 4; k++) {
    if (pos[k] < 0) continue;
    const int row = row_start + r0 + warp * 4 + k;
    const float inv = 1.0f / l[k];
#pragma unroll
    for (int j = 0; j < 4; j++)
      if (j < dpl) out[((size_t)row * heads + h) * head_dim + lane + 32 * j] = acc[k][j] * inv;
  }
}

#define ATTN_PREFILL(name, KV)                                                             \
  extern "C" __global__ void __launch_bounds__(128)                                        \
      name(float *out, const float *q, const uint8_t *kc, const uint8_t *vc,               \
           const int *positions, const int *table, int row_start, int row_count, int heads, \
           int kv_heads, int head_dim, int block_size, float scale, int window) {          \
    attn_prefill<KV>(out, q, kc, vc, positions, table, row_start, row_count, heads,        \
                     kv_heads, head_dim, block_size, scale, window);                       \
  }                                                                                        \
  EXPORT_KERNEL(name)

ATTN_PREFILL(attn_prefill_f32, KvF32)
ATTN_PREFILL(attn_prefill_f16, KvF16)
ATTN_PREFILL(attn_prefill_q8_0, KvQ8_0)
ATTN_PREFILL(attn_prefill_q4_0, KvQ4_0)

/*
 * Merges the splits of each (row, head) into out; with Q8 also writes out's q8_1 form for
 * the next product (kp columns per row; a row of no sequence keeps its values and is
 * quantized as it is). grid (heads, rows), 128 threads; head_dim a multiple of 32.
 */
template <bool Q8>
__device__ __forceinline__ void combine(float *out, int8_t *xq, float2 *xd, const float *acc,
                                        const float *ml, const int *row_seq, int heads,
                                        int head_dim, int splits, int kp) {
  const int h = blockIdx.x, t = blockIdx.y;
  const bool live = row_seq[t] >= 0;
  if (!Q8 && !live) return;
  const size_t base = ((size_t)t * heads + h) * splits;
  float mm = NEG_INF;
  for (int s = 0; s < splits; s++) mm = fmaxf(mm, ml[2 * (base + s)]);
  float ll = 0.0f;
  for (int s = 0; s < splits; s++) {
    const float m = ml[2 * (base + s)];
    if (m != NEG_INF) ll += ml[2 * (base + s) + 1] * expf(m - mm);
  }
  const float inv = 1.0f / ll;
  float *row = out + (size_t)t * heads * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float v;
    if (live) {
      float sum = 0.0f;
      for (int s = 0; s < splits; s++) {
        const float m = ml[2 * (base + s)];
        if (m != NEG_INF) sum += acc[(base + s) * head_dim + d] * expf(m - mm);
      }
      v = sum * inv;
      row[h * head_dim + d] = v;
    } else {
      v = row[h * head_dim + d];
    }
    if (Q8) {
      const int col = h * head_dim + d;
      const float amax = warp_max(fabsf(v));
      const float dq = amax / 127.0f;
      const int q = amax == 0.0f ? 0 : (int)roundf(v / dq);
      const int qsum = warp_sum_int(q);
      xq[(size_t)t * kp + col] = (int8_t)q;
      if ((threadIdx.x & 31) == 0) xd[(size_t)t * (kp / 32) + col / 32] = make_float2(dq, dq * (float)qsum);
    }
  }
}

extern "C" __global__ void attn_combine(float *out, const float *acc, const float *ml,
                                        const int *row_seq, int heads, int head_dim,
                                        int splits) {
  combine<false>(out, nullptr, nullptr, acc, ml, row_seq, heads, head_dim, splits, 0);
}
EXPORT_KERNEL(attn_combine)

extern "C" __global__ void attn_combine_q8(float *out, int8_t *xq, float2 *xd, const float *acc,
                                           const float *ml, const int *row_seq, int heads,
                                           int head_dim, int splits, int kp) {
  combine<true>(out, xq, xd, acc, ml, row_seq, heads, head_dim, splits, kp);
}
EXPORT_KERNEL(attn_combine_q8)
