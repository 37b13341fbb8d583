/*
 * Attention for one kv head and a run of tokens over the paged cache: every query row
 * (token, head of the group) is computed together so each K/V row is read once for all of
 * them. Online softmax over tiles of positions (flash-attention style), all in f32, each
 * row stopping at its own token's position (and, under a sliding window, starting at the
 * first position the window shows it). AVX-512 reads f16 rows in place (VCVTPH2PS
 * from memory); other levels convert a tile first.
 */
#include <math.h>

#include "isa_common.h"
#include "isa_exp.h"
#include "dequant_ref.h"
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
 * along the blocks. Quantized rows, and f16 ones without DIRECT_F16, are converted into
 * buf. */
static inline void tile_rows(const nk_attn *a, const void *cache, int64_t p0, int64_t n,
                             int64_t kvh, float *buf, const void **rows) {
  const int f16 = a->kv_type == NK_F16;
  const int64_t head_bytes = nk_kv_head_bytes(a->kv_type, a->head_dim);
  int64_t logical = p0 / a->block_size, slot = p0 % a->block_size;
  for (int64_t j = 0; j < n; j++) {
    const int64_t at = (a->block_table[logical] * a->block_size + slot) * a->n_kv_heads + kvh;
    rows[j] = (const uint8_t *)cache + at * head_bytes;
    if (f16 && !DIRECT_F16) {
      nk_f16_row(rows[j], buf + j * a->head_dim, a->head_dim);
      rows[j] = buf + j * a->head_dim;
    } else if (nk_kv_quantized(a->kv_type)) {
      nk_dequantize_row(a->kv_type, rows[j], a->head_dim, buf + j * a->head_dim);
      rows[j] = buf + j * a->head_dim;
    }
    if (++slot == a->block_size) {
      slot = 0;
      logical++;
    }
  }
}

/* Turns one row's n scores into exp(s - running max), rescaling what came before.
 * Returns the factor the earlier accumulation must be multiplied by. */
static float tile_softmax(float *s, int64_t n, float *run_max, float *run_sum) {
  float tile_max = s[0];
  for (int64_t j = 1; j < n; j++) tile_max = s[j] > tile_max ? s[j] : tile_max;
  const float new_max = tile_max > *run_max ? tile_max : *run_max;
  const float corr = *run_max == -INFINITY ? 0.0f : nk_expf(*run_max - new_max);
  for (int64_t j = 0; j < n; j++) s[j] = nk_expf(s[j] - new_max);
  float lanes[16] = {0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int l = 0; l < 16; l++) lanes[l] += s[j + l];
  }
  float sum = 0.0f;
  for (; j < n; j++) sum += s[j];
  for (int l = 0; l < 16; l++) sum += lanes[l];
  *run_sum = *run_sum * corr + sum;
  *run_max = new_max;
  return corr;
}

/* Tokens [t0, t0 + nt) of kv head kvh over the positions [p_begin, p_end) they see: the
 * normalised rows into a->out, or their partial softmax into `part` (nk_attn_part_put). */
static void attend_range(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh, int64_t p_begin,
                         int64_t p_end, float *scratch, float *part) {
  const int64_t d = a->head_dim;
  const int64_t g_n = a->n_heads / a->n_kv_heads, n_rows = nt * g_n;
  const int f16 = a->kv_type == NK_F16 && DIRECT_F16;
  float *acc = scratch;
  float *scores = acc + n_rows * d;
  float *run_max = scores + n_rows * NK_ATTN_TILE;
  float *run_sum = run_max + n_rows;
  float *buf = run_sum + n_rows + n_rows * d;
  const void *rows[NK_ATTN_TILE];
  int64_t start, len;
  nk_attn_seen(a, t0, nt, &start, &len);
  if (start < p_begin) start = p_begin;
  if (len > p_end) len = p_end;
  for (int64_t i = 0; i < n_rows * d; i++) acc[i] = 0.0f;
  for (int64_t r = 0; r < n_rows; r++) {
    run_max[r] = -INFINITY;
    run_sum[r] = 0.0f;
  }
  for (int64_t p0 = start; p0 < len; p0 += NK_ATTN_TILE) {
    const int64_t n = len - p0 < NK_ATTN_TILE ? len - p0 : NK_ATTN_TILE;
    tile_rows(a, a->k_cache, p0, n, kvh, buf, rows);
    for (int64_t r = 0; r < n_rows; r++) {
      /* Row r is head r % g_n of token t0 + r / g_n. */
      const int64_t t = t0 + r / g_n;
      const float *q = a->q + (t * a->n_heads + kvh * g_n + r % g_n) * d;
      int64_t lo, hi;
      nk_attn_tile_span(a, t, p0, n, &lo, &hi);
      for (int64_t j = lo; j < hi; j++) {
        scores[r * NK_ATTN_TILE + j] = dot(q, rows[j], d, f16) * a->scale;
      }
    }
    for (int64_t r = 0; r < n_rows; r++) {
      int64_t lo, hi;
      nk_attn_tile_span(a, t0 + r / g_n, p0, n, &lo, &hi);
      if (hi <= lo) continue;
      const float corr =
          tile_softmax(scores + r * NK_ATTN_TILE + lo, hi - lo, run_max + r, run_sum + r);
      if (corr != 1.0f) {
        for (int64_t i = 0; i < d; i++) acc[r * d + i] *= corr;
      }
    }
    tile_rows(a, a->v_cache, p0, n, kvh, buf, rows);
    for (int64_t r = 0; r < n_rows; r++) {
      int64_t lo, hi;
      nk_attn_tile_span(a, t0 + r / g_n, p0, n, &lo, &hi);
      if (hi > lo) accumulate(acc + r * d, scores + r * NK_ATTN_TILE + lo, rows + lo, hi - lo, d, f16);
    }
  }
  for (int64_t r = 0; r < n_rows; r++) {
    const int64_t row = (t0 + r / g_n) * a->n_heads + kvh * g_n + r % g_n;
    if (part) {
      nk_attn_part_put(part, row, d, run_max[r], run_sum[r], acc + r * d);
      continue;
    }
    const float inv = 1.0f / run_sum[r];
    for (int64_t i = 0; i < d; i++) a->out[row * d + i] = acc[r * d + i] * inv;
  }
}

void NK_FN(nk_attend_item)(const nk_attn *a, int64_t t0, int64_t nt, int64_t kvh,
                           float *scratch) {
#if defined(__AVX512F__)
  if (nk_attend_avx512(a, t0, nt, kvh, scratch)) return;
#endif
  attend_range(a, t0, nt, kvh, 0, INT64_MAX, scratch, NULL);
}

void NK_FN(nk_attend_split)(const nk_attn *a, int64_t p_begin, int64_t p_end, float *scratch,
                            float *part) {
#if defined(__AVX512F__)
  if (nk_attend_span_avx512(a, p_begin, p_end, scratch, part)) return;
#endif
  for (int64_t h = 0; h < a->n_kv_heads; h++) {
    attend_range(a, 0, a->n_tokens, h, p_begin, p_end, scratch, part);
  }
}
