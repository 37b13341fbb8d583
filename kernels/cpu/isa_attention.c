/*
 * Attention for one (token, kv head) over the paged cache: the group of query heads that
 * share the kv head is computed together so each K/V row is read once for all of them.
 * Online softmax over tiles of positions (flash-attention style), all in f32. AVX-512
 * reads f16 rows in place (VCVTPH2PS from memory); other levels convert a tile first.
 */
#include <math.h>

#include "isa_common.h"
#include "isa_exp.h"
#if defined(__AVX512F__)
#include "kern_avx512.h"
#endif

#if defined(__AVX512F__)
#define DIRECT_F16 1

/* Sixteen values of a cache row as f32. */
static inline __m512 row16(const void *row, int64_t i, int f16) {
  if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + i)));
  return _mm512_loadu_ps((const float *)row + i);
}
#else
#define DIRECT_F16 0
#endif

static inline float row_at(const void *row, int64_t i, int f16) {
  return f16 ? nk_f16(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

static inline float dot(const float *q, const void *row, int64_t n, int f16) {
  int64_t i = 0;
  float sum = 0.0f;
#if DIRECT_F16
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), row16(row, i, f16), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), row16(row, i + 16, f16), acc1);
  }
  for (; i + 16 <= n; i += 16)
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), row16(row, i, f16), acc0);
  sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#else
  float lanes[16] = {0};
  const float *b = row;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; l++) lanes[l] += q[i + l] * b[i + l];
  }
  for (int l = 0; l < 16; l++) sum += lanes[l];
#endif
  for (; i < n; i++) sum += q[i] * row_at(row, i, f16);
  return sum;
}

/* o[0, d) += sum_j p[j] * rows[j][0, d). */
static inline void accumulate(float *o, const float *p, const void *const *rows, int64_t n,
                              int64_t d, int f16) {
  int64_t i = 0;
#if DIRECT_F16
  for (; i + 64 <= d; i += 64) {
    __m512 o0 = _mm512_loadu_ps(o + i), o1 = _mm512_loadu_ps(o + i + 16);
    __m512 o2 = _mm512_loadu_ps(o + i + 32), o3 = _mm512_loadu_ps(o + i + 48);
    for (int64_t j = 0; j < n; j++) {
      const __m512 pj = _mm512_set1_ps(p[j]);
      o0 = _mm512_fmadd_ps(pj, row16(rows[j], i, f16), o0);
      o1 = _mm512_fmadd_ps(pj, row16(rows[j], i + 16, f16), o1);
      o2 = _mm512_fmadd_ps(pj, row16(rows[j], i + 32, f16), o2);
      o3 = _mm512_fmadd_ps(pj, row16(rows[j], i + 48, f16), o3);
    }
    _mm512_storeu_ps(o + i, o0);
    _mm512_storeu_ps(o + i + 16, o1);
    _mm512_storeu_ps(o + i + 32, o2);
    _mm512_storeu_ps(o + i + 48, o3);
  }
  for (; i + 16 <= d; i += 16) {
    __m512 o0 = _mm512_loadu_ps(o + i);
    for (int64_t j = 0; j < n; j++)
      o0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), row16(rows[j], i, f16), o0);
    _mm512_storeu_ps(o + i, o0);
  }
#endif
  for (int64_t j = 0; j < n; j++) {
    for (int64_t k = i; k < d; k++) o[k] += p[j] * row_at(rows[j], k, f16);
  }
}

/* The rows of positions [p0, p0 + n) of kv head kvh: one division per tile, then a walk
 * along the blocks. Without DIRECT_F16, f16 rows are converted into buf. */
static inline void tile_rows(const nk_attn *a, const void *cache, int64_t p0, int64_t n,
                             int64_t kvh, float *buf, const void **rows) {
  const int f16 = a->kv_type == NK_F16;
  const int64_t elt = f16 ? 2 : 4;
  int64_t logical = p0 / a->block_size, slot = p0 % a->block_size;
  for (int64_t j = 0; j < n; j++) {
    const int64_t off =
        ((a->block_table[logical] * a->block_size + slot) * a->n_kv_heads + kvh) * a->head_dim;
    rows[j] = (const uint8_t *)cache + off * elt;
    if (f16 && !DIRECT_F16) {
      nk_f16_row(rows[j], buf + j * a->head_dim, a->head_dim);
      rows[j] = buf + j * a->head_dim;
    }
    if (++slot == a->block_size) {
      slot = 0;
      logical++;
    }
  }
}

void NK_FN(nk_attend_item)(const nk_attn *a, int64_t t, int64_t kvh, float *scratch) {
#if defined(__AVX512F__)
  if (nk_attend_avx512(a, t, kvh, scratch)) return;
#endif
  const int64_t d = a->head_dim;
  const int64_t g_n = a->n_heads / a->n_kv_heads;
  const int64_t len = (int64_t)a->positions[t] + 1;
  const int f16 = a->kv_type == NK_F16 && DIRECT_F16;
  float *acc = scratch;
  float *scores = acc + g_n * d;
  float *run_max = scores + g_n * NK_ATTN_TILE;
  float *run_sum = run_max + g_n;
  float *buf = run_sum + g_n;
  const void *rows[NK_ATTN_TILE];
  const float *q = a->q + (t * a->n_heads + kvh * g_n) * d;
  for (int64_t i = 0; i < g_n * d; i++) acc[i] = 0.0f;
  for (int64_t g = 0; g < g_n; g++) {
    run_max[g] = -INFINITY;
    run_sum[g] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < len; p0 += NK_ATTN_TILE) {
    const int64_t n = len - p0 < NK_ATTN_TILE ? len - p0 : NK_ATTN_TILE;
    tile_rows(a, a->k_cache, p0, n, kvh, buf, rows);
    for (int64_t j = 0; j < n; j++) {
      for (int64_t g = 0; g < g_n; g++) {
        scores[g * NK_ATTN_TILE + j] = dot(q + g * d, rows[j], d, f16) * a->scale;
      }
    }
    for (int64_t g = 0; g < g_n; g++) {
      float *s = scores + g * NK_ATTN_TILE;
      float tile_max = s[0];
      for (int64_t j = 1; j < n; j++) tile_max = s[j] > tile_max ? s[j] : tile_max;
      const float new_max = tile_max > run_max[g] ? tile_max : run_max[g];
      const float corr = run_max[g] == -INFINITY ? 0.0f : nk_expf(run_max[g] - new_max);
      for (int64_t j = 0; j < n; j++) s[j] = nk_expf(s[j] - new_max);
      float lanes[16] = {0};
      int64_t j = 0;
      for (; j + 16 <= n; j += 16) {
        for (int l = 0; l < 16; l++) lanes[l] += s[j + l];
      }
      float sum = 0.0f;
      for (; j < n; j++) sum += s[j];
      for (int l = 0; l < 16; l++) sum += lanes[l];
      run_sum[g] = run_sum[g] * corr + sum;
      run_max[g] = new_max;
      if (corr != 1.0f) {
        for (int64_t i = 0; i < d; i++) acc[g * d + i] *= corr;
      }
    }
    tile_rows(a, a->v_cache, p0, n, kvh, buf, rows);
    for (int64_t g = 0; g < g_n; g++) {
      accumulate(acc + g * d, scores + g * NK_ATTN_TILE, rows, n, d, f16);
    }
  }
  for (int64_t g = 0; g < g_n; g++) {
    float *out = a->out + (t * a->n_heads + kvh * g_n + g) * d;
    const float inv = 1.0f / run_sum[g];
    for (int64_t i = 0; i < d; i++) out[i] = acc[g * d + i] * inv;
  }
}
