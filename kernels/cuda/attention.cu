/*
 * Attention over the paged KV cache (kv_cache.cuh; kv_store.cu writes it), of any cache
 * type: quantized rows are dequantized as they are loaded. A step's rows carry their
 * position (`positions`) and sequence (`row_seq`, -1 for a row of no sequence), and
 * sequence s's block table is tables[s * table_stride ...].
 *
 * Decode rows take flash-decoding: attn_split_* computes, for one (row, KV head, split),
 * the unnormalised softmax-weighted sum of V over its share of the positions the row sees,
 * with the running max and normaliser, for every query head of the KV head's group;
 * attn_combine merges the splits (log-sum-exp). The number of splits is a launch parameter
 * chosen from shapes alone (the block-table bucket, never positions), so a captured CUDA
 * graph stays valid as sequences grow.
 *
 * A row at position p sees positions 0..p, or under a sliding window of `window` (> 0)
 * positions p - window + 1..p (llama.cpp's SWA mask, Gemma 3's local layers).
 */
#include "kv_cache.cuh"

#define ATTN_THREADS 128
#define MAX_HEAD_DIM 256

/* The first position a row at `pos` sees (window 0: no window). */
__device__ __forceinline__ int attn_first(int pos, int window) {
  return window > 0 ? imax(0, pos - window + 1) : 0;
}

/*
 * Decode attention, flash-decoding. grid (kv_heads * groups, rows, splits), 128 threads:
 * a block serves one row's query heads of one KV head (all of its GQA group, in groups of
 * up to DEC_HEADS), over one split of the positions the row sees, so each K and V row of
 * the split is read once for every query head it serves. A decode step has one row per
 * sequence; a sequence's speculative run (k + 1 rows) is that many rows.
 *
 * The split is walked in tiles of DEC_TILE positions: the tile's block-table entries are
 * loaded first, one per position, all at once; then its V rows are loaded into registers
 * and its K rows staged in shared memory (8 values per load, dequantized as they arrive),
 * both in flight together; every (head, position) score is computed at once (a warp
 * scores 32 positions of one head), each head's running softmax updated by one warp, V
 * staged over K, and the probability-weighted V added to the accumulators, thread i
 * holding values i, i + 128, ... of the block's (head, dimension) grid.
 * Output per (row, query head, split) s: ml[2s] = max score, ml[2s+1] = sum of
 * exp(score - max), acc[s * head_dim ...] = sum of exp(score - max) * V, as attn_combine
 * reads them. head_dim a multiple of 32, at most MAX_HEAD_DIM.
 */
#define DEC_TILE 32
#define DEC_HEADS 8
#define DEC_ACC (DEC_HEADS * MAX_HEAD_DIM / ATTN_THREADS)
#define DEC_VECS (DEC_TILE * MAX_HEAD_DIM / 8 / ATTN_THREADS)

template <typename KV>
__device__ __forceinline__ void attn_split(float *acc_out, float *ml_out, const float *q,
                                           const uint8_t *kc, const uint8_t *vc,
                                           const int *positions, const int *row_seq,
                                           const int *tables, int table_stride, int heads,
                                           int kv_heads, int head_dim, int block_size,
                                           int splits, float scale, int window) {
  __shared__ float qs[DEC_HEADS][MAX_HEAD_DIM];
  __shared__ float kvs[DEC_TILE][MAX_HEAD_DIM + 1];
  __shared__ float ps[DEC_HEADS][DEC_TILE];
  __shared__ float sm_m[DEC_HEADS], sm_l[DEC_HEADS], sm_c[DEC_HEADS];
  __shared__ size_t slots[DEC_TILE];
  const int group = heads / kv_heads, groups = (group + DEC_HEADS - 1) / DEC_HEADS;
  const int kvh = blockIdx.x / groups, g0 = (blockIdx.x % groups) * DEC_HEADS;
  const int hn = imin(DEC_HEADS, group - g0), h0 = kvh * group + g0;
  const int t = blockIdx.y, s = blockIdx.z, tid = threadIdx.x;
  const int seq = row_seq[t];
  if (seq < 0) return;
  const int first = attn_first(positions[t], window), len = positions[t] + 1;
  const int chunk = (len - first + splits - 1) / splits;
  const int p0 = first + s * chunk, p1 = imin(len, p0 + chunk);
  const int *table = tables + (size_t)seq * table_stride;
  const int lane = tid & 31, warp = tid >> 5, cells = hn * head_dim, vecs = head_dim >> 3;

  for (int e = tid; e < hn * head_dim; e += ATTN_THREADS) {
    const int g = e / head_dim, d = e % head_dim;
    qs[g][d] = q[((size_t)t * heads + h0 + g) * head_dim + d] * scale;
  }
  if (tid < DEC_HEADS) sm_m[tid] = NEG_INF, sm_l[tid] = 0.0f;
  float acc[DEC_ACC];
#pragma unroll
  for (int i = 0; i < DEC_ACC; i++) acc[i] = 0.0f;

  for (int t0 = p0; t0 < p1; t0 += DEC_TILE) {
    const int n = imin(DEC_TILE, p1 - t0);
    __syncthreads();
    if (tid < n) slots[tid] = kv_slot(table, t0 + tid, block_size);
    __syncthreads();
    float vb[DEC_VECS][8];
#pragma unroll
    for (int i = 0; i < DEC_VECS; i++) {
      const int e = tid + i * ATTN_THREADS;
      if (e < n * vecs)
        KV::load8(kv_row<KV>(vc, slots[e / vecs], kv_heads, kvh, head_dim), (e % vecs) << 3,
                  vb[i]);
    }
    for (int e = tid; e < n * vecs; e += ATTN_THREADS) {
      const int j = e / vecs, c = (e % vecs) << 3;
      float v[8];
      KV::load8(kv_row<KV>(kc, slots[j], kv_heads, kvh, head_dim), c, v);
#pragma unroll
      for (int i = 0; i < 8; i++) kvs[j][c + i] = v[i];
    }
    __syncthreads();
    for (int e = tid; e < hn * DEC_TILE; e += ATTN_THREADS) {
      const int g = e / DEC_TILE, j = e % DEC_TILE;
      float sc = NEG_INF;
      if (j < n) {
        sc = 0.0f;
        for (int d = 0; d < head_dim; d++) sc += qs[g][d] * kvs[j][d];
      }
      ps[g][j] = sc;
    }
    __syncthreads();
    // Each head's softmax step (warp per head) while V replaces K in shared memory.
    for (int g = warp; g < hn; g += ATTN_THREADS / 32) {
      const float sc = ps[g][lane];
      const float mn = fmaxf(sm_m[g], warp_max(sc));
      const float p = sc == NEG_INF ? 0.0f : expf(sc - mn);
      const float c = expf(sm_m[g] - mn), sum = warp_sum(p);
      ps[g][lane] = p;
      if (lane == 0) sm_c[g] = c, sm_l[g] = sm_l[g] * c + sum, sm_m[g] = mn;
    }
#pragma unroll
    for (int i = 0; i < DEC_VECS; i++) {
      const int e = tid + i * ATTN_THREADS;
      if (e >= n * vecs) break;
      const int j = e / vecs, c = (e % vecs) << 3;
#pragma unroll
      for (int k = 0; k < 8; k++) kvs[j][c + k] = vb[i][k];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < DEC_ACC; i++) {
      const int e = tid + i * ATTN_THREADS;
      if (e >= cells) break;
      const int g = e / head_dim, d = e % head_dim;
      float a = acc[i] * sm_c[g];
      for (int j = 0; j < n; j++) a += ps[g][j] * kvs[j][d];
      acc[i] = a;
    }
  }
  __syncthreads();
  const size_t base = ((size_t)t * heads + h0) * splits + s;
  if (tid < hn) {
    const size_t idx = base + (size_t)tid * splits;
    ml_out[2 * idx] = sm_m[tid], ml_out[2 * idx + 1] = sm_l[tid];
  }
#pragma unroll
  for (int i = 0; i < DEC_ACC; i++) {
    const int e = tid + i * ATTN_THREADS;
    if (e >= cells) break;
    const int g = e / head_dim, d = e % head_dim;
    acc_out[(base + (size_t)g * splits) * head_dim + d] = acc[i];
  }
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
/* 8-value loads of K (and of V) per thread per tile. */
#define PF_VECS (PF_TILE * PF_MAX_DIM / 8 / 128)

template <typename KV>
__device__ __forceinline__ void attn_prefill(float *out, const float *q, const uint8_t *kc,
                                             const uint8_t *vc, const int *positions,
                                             const int *table, int row_start, int row_count,
                                             int heads, int kv_heads, int head_dim,
                                             int block_size, float scale, int window) {
  __shared__ float qs[PF_ROWS][PF_MAX_DIM];
  __shared__ float ks[PF_TILE][PF_MAX_DIM + 1];
  __shared__ float vs[PF_TILE][PF_MAX_DIM];
  __shared__ size_t slots[PF_TILE];
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
  const int vecs = head_dim >> 3;
  for (int t0 = start; t0 <= last; t0 += PF_TILE) {
    __syncthreads();
    if (threadIdx.x < PF_TILE && t0 + (int)threadIdx.x <= last) {
      slots[threadIdx.x] = kv_slot(table, t0 + threadIdx.x, block_size);
    }
    __syncthreads();
    // Every K and V load of the tile is issued before the first is stored: staged one value
    // at a time, each waiting on the last, the tile took most of a 512-token prefill's
    // attention time on an H200.
    float kb[PF_VECS][8], vb[PF_VECS][8];
#pragma unroll
    for (int i = 0; i < PF_VECS; i++) {
      const int e = threadIdx.x + i * 128, j = e / vecs, c = (e % vecs) << 3;
      if (e < PF_TILE * vecs && t0 + j <= last) {
        KV::load8(kv_row<KV>(kc, slots[j], kv_heads, kvh, head_dim), c, kb[i]);
        KV::load8(kv_row<KV>(vc, slots[j], kv_heads, kvh, head_dim), c, vb[i]);
      } else {
#pragma unroll
        for (int k = 0; k < 8; k++) kb[i][k] = 0.0f, vb[i][k] = 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < PF_VECS; i++) {
      const int e = threadIdx.x + i * 128, j = e / vecs, c = (e % vecs) << 3;
      if (e >= PF_TILE * vecs) break;
#pragma unroll
      for (int k = 0; k < 8; k++) ks[j][c + k] = kb[i][k], vs[j][c + k] = vb[i][k];
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
 * quantized as it is). grid (heads, rows), 128 threads; head_dim a multiple of 32, splits
 * at most COMBINE_SPLITS. Thread s reads split s's max and normaliser, so each split's
 * weight exp(m_s - max) is computed once and the loads of all splits are in flight at once
 * (a loop over the splits in every thread waited on each in turn).
 */
#define COMBINE_SPLITS 128

template <bool Q8>
__device__ __forceinline__ void combine(float *out, int8_t *xq, float2 *xd, const float *acc,
                                        const float *ml, const int *row_seq, int heads,
                                        int head_dim, int splits, int kp) {
  __shared__ float weight[COMBINE_SPLITS];
  __shared__ float red[COMBINE_SPLITS / 32];
  const int h = blockIdx.x, t = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const bool live = row_seq[t] >= 0;
  if (!Q8 && !live) return;
  const size_t base = ((size_t)t * heads + h) * splits;
  const float m = tid < splits ? ml[2 * (base + tid)] : NEG_INF;
  const float lv = tid < splits ? ml[2 * (base + tid) + 1] : 0.0f;
  const float wm = warp_max(m);
  if (lane == 0) red[warp] = wm;
  __syncthreads();
  float mm = NEG_INF;
  for (int w = 0; w < nw; w++) mm = fmaxf(mm, red[w]);
  const float e = m == NEG_INF ? 0.0f : expf(m - mm);
  if (tid < splits) weight[tid] = e;
  const float wl = warp_sum(lv * e);
  __syncthreads();
  if (lane == 0) red[warp] = wl;
  __syncthreads();
  float ll = 0.0f;
  for (int w = 0; w < nw; w++) ll += red[w];
  const float inv = 1.0f / ll;
  float *row = out + (size_t)t * heads * head_dim;
  for (int d = tid; d < head_dim; d += blockDim.x) {
    float v;
    if (live) {
      float sum = 0.0f;
#pragma unroll 8
      for (int s = 0; s < splits; s++) sum += acc[(base + s) * head_dim + d] * weight[s];
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
