/*
 * AVX-512 attention of a decode step or a short verification (a sequence with a few query
 * rows per kv head, taken up to four at a time in registers) over one span of its
 * positions, all kv heads at once: flash-decoding's split, so that a long context spreads
 * over every thread however few kv heads the model has, and its partial softmax is merged
 * with the other spans' afterwards (attention.c).
 *
 * The span is walked a tile of positions at a time and, inside a tile, kv head after kv
 * head: the tile's rows of all heads lie together in the paged blocks (a slot holds every
 * head's row), so the pass reads whole stretches of memory instead of one head's row every
 * few KiB, and each head's rows of the next tile are requested into L2 while this tile's
 * are multiplied (its K during the scores, its V during the weighted sum). A q8_0 or q4_0
 * cache goes through integer steps of its own (kern_avx512_attention_quant.h).
 *
 * A tile takes three passes over the heads: every head's scores, then every head's softmax,
 * then every head's weighted sum. A softmax is a chain of dependent steps (maximum, exp,
 * sum, rescale) that the weighted sum waits on; side by side, the heads' chains overlap,
 * and sixteen rows' maxima, corrections and sums take one vector each (span_weights).
 * Against scores, softmax and sum head by head, measured with both forms alternating in one
 * process (2-core Zen 5 VM, Qwen3-0.6B's 8 kv heads, 28 layers, 2 threads): f16 at 8192
 * positions 27.63 -> 26.85 and 27.34 -> 26.91 ms a token, at 512 1.95 -> 1.79; q8_0 at 8192
 * 22.14 -> 21.15 and 24.27 -> 22.89, at 32768 (7 layers) 19.99 -> 18.30. The vector
 * softmax then took f16 at 8192 from 33.62 to 32.82 and 32.30 to 32.01 ms, q8_0 from 27.36
 * to 26.17 and 23.91 to 22.97.
 *
 * Where the time goes at depth (same VM, 3.5 GHz, 8 kv heads of 128, 2 query rows each):
 * 8192 positions x 28 layers of f16 take 22-25 ms (38-42 GB/s against a 62-65 GB/s probe),
 * and the same arithmetic on a cache-resident context already takes ~16 ms of that: scores
 * ~43%, weighted sum ~37%, softmax ~9%. A position of a kv head costs 16 conversions and
 * 32 FMAs, and VCVTPH2PS issues on the FMA pipes (two conversions and four FMAs take four
 * cycles), so f16 is bounded by its arithmetic about as much as by memory; q8_0 (integer
 * scores, a conversion per V value) costs ~80% of f16's arithmetic on half the bytes,
 * which is why it is only ~1.4x f16. Measured and not kept (libraries alternated): requests
 * two or three tiles ahead (1.02x, 1.05x the time), a whole position's row requested in one
 * burst per head (1.36x), each block's rows grouped by kv head (1.36x; 1.65x with no
 * requests), no requests at all (1.59x), d and the cache type as constants (unchanged).
 * Later, one thread over 32768 positions (a C harness, huge pages, blocks in order): a
 * plain read of this walk's order with its requests gets 26 GB/s where reading every tile
 * in address order gets 33, but the kernels that walk in address order (a position's row
 * of all heads at once, each head's weighted sum kept in memory; or the blocks regrouped by
 * kv head) measured 79-105 cycles a (position, kv head) against this one's 82-88, within
 * the machine's noise; q8_0 tiles of 8 positions took 1.25x, and requests into L1 instead
 * of L2 changed nothing.
 */
#include "kern_avx512_attention_quant.h"

/* Positions a step of the walk takes: one usual paged block, so that the heads, one after
 * another, sweep 32 KiB (Qwen3-0.6B's f16 rows) where the hardware's prefetchers follow them.
 * Measured on the 2-core EPYC VM, 2048 positions x 28 layers, 2 threads: 10 ms a token at
 * 16 positions, 11.5 at 32, 13.5 at 64. */
#define SPAN_TILE 16

/* A kv head's state in scratch (nk_attn_split_head_floats of it): each row's accumulator
 * and copied query, its running maximum and sum, and for a q8_0 or q4_0 cache the query as
 * q8_0. */
typedef struct {
  float *acc, *q, *run_max, *run_sum;
  q8_chunk *q8;
} head_state;

static head_state head_at(float *scratch, int64_t h, int64_t n_rows, int64_t d) {
  head_state s;
  s.acc = scratch + h * nk_attn_split_head_floats(n_rows, d);
  s.q = s.acc + n_rows * d;
  s.run_max = s.q + n_rows * d;
  s.run_sum = s.run_max + n_rows;
  s.q8 = (q8_chunk *)(s.run_sum + n_rows);
  return s;
}

/* tile_weights for every head's rows (n_kv * n_rows of them) sixteen rows to a vector: the
 * rows' maxima and sums come out of transpositions and one exp16 gives sixteen rows'
 * corrections, where row by row each took two reductions and a scalar exp. Row
 * rho = h * n_rows + r has its scores at scores + rho * NK_ATTN_TILE. */
static void span_weights(const nk_attn *a, float *scratch, int64_t g_n, int64_t n_rows,
                         int64_t n_kv, int64_t p0, int64_t n, float *scores) {
  const int64_t d = a->head_dim, total = n_kv * n_rows;
  /* The positions each row sees depend on its token only, not on its kv head: worked out
   * once a tile, where row by row they cost two divisions a row. */
  __mmask16 row_seen[NK_ATTN_SPLIT_ROWS];
  for (int64_t r = 0; r < n_rows; r++) {
    int64_t lo, hi;
    nk_attn_tile_span(a, r / g_n, p0, n, &lo, &hi);
    row_seen[r] = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
  }
  for (int64_t rho0 = 0; rho0 < total; rho0 += 16) {
    const int64_t count = total - rho0 < 16 ? total - rho0 : 16;
    __m512 v[16];
    __mmask16 seen[16];
    float run_max[16], run_sum[16];
    /* Where row rho0 + i keeps its running maximum, sum and accumulator. */
    float *max_at[16], *sum_at[16], *acc_at[16];
    /* Row rho0 + i is row r of kv head h, counted along. */
    for (int64_t i = 0, h = rho0 / n_rows, r = rho0 % n_rows; i < 16; i++) {
      v[i] = _mm512_set1_ps(-INFINITY);
      seen[i] = 0;
      run_max[i] = -INFINITY;
      run_sum[i] = 0.0f;
      if (i >= count) continue;
      const head_state s = head_at(scratch, h, n_rows, d);
      max_at[i] = s.run_max + r;
      sum_at[i] = s.run_sum + r;
      acc_at[i] = s.acc + r * d;
      seen[i] = row_seen[r];
      v[i] = _mm512_mask_loadu_ps(v[i], seen[i], scores + (rho0 + i) * NK_ATTN_TILE);
      run_max[i] = *max_at[i];
      run_sum[i] = *sum_at[i];
      if (++r == n_rows) {
        r = 0;
        h++;
      }
    }
    const __m512 old_max = _mm512_loadu_ps(run_max);
    const __m512 new_max = _mm512_max_ps(old_max, nk_max16_ps(v));
    /* A row that saw nothing before has nothing to correct. */
    const __mmask16 before = _mm512_cmp_ps_mask(old_max, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    const __m512 corr = _mm512_maskz_mov_ps(before, nk_exp16(_mm512_sub_ps(old_max, new_max)));
    float maxima[16];
    _mm512_storeu_ps(maxima, new_max);
    for (int64_t i = 0; i < count; i++) {
      v[i] = _mm512_maskz_mov_ps(seen[i], nk_exp16(_mm512_sub_ps(v[i], _mm512_set1_ps(maxima[i]))));
      _mm512_storeu_ps(scores + (rho0 + i) * NK_ATTN_TILE, v[i]);
    }
    for (int64_t i = count; i < 16; i++) v[i] = _mm512_setzero_ps();
    float sums[16], corrs[16];
    _mm512_storeu_ps(sums, _mm512_fmadd_ps(_mm512_loadu_ps(run_sum), corr, nk_sum16_ps(v)));
    _mm512_storeu_ps(corrs, corr);
    for (int64_t i = 0; i < count; i++) {
      if (!seen[i]) continue;
      *max_at[i] = maxima[i];
      *sum_at[i] = sums[i];
      if (corrs[i] != 1.0f) {
        for (int64_t j = 0; j < d; j++) acc_at[i][j] *= corrs[i];
      }
    }
  }
}

/* The scores of a kv head's n_rows query rows against the tile's n K rows (at krows[j] +
 * off), HEADS_PER_PASS rows at a time (a tile's rows stay in L1 for the later passes); the
 * first pass requests next[0, n_next). quant: the cache's integer steps (q4: it is q4_0). */
static void span_scores(const nk_attn *a, head_state s, int64_t n_rows, int quant, int q4,
                        const uint8_t **krows, int64_t off, int64_t n,
                        const uint8_t *const *next, int64_t n_next, int64_t row_bytes,
                        float *scores) {
  const int64_t d = a->head_dim;
  for (int64_t g0 = 0; g0 < n_rows; g0 += HEADS_PER_PASS) {
    const int64_t gn = rows_in_pass(n_rows, g0);
    const int64_t ask = g0 == 0 ? n_next : 0;
    float *out = scores + g0 * NK_ATTN_TILE;
    if (quant) {
      q8_tile_scores(s.q8 + g0 * (d / 64), gn, d, krows, off, n, q4, a->scale, next, ask,
                     row_bytes, out);
    } else {
      tile_scores(s.q + g0 * d, gn, d, krows, off, n, a->kv_type, a->scale, next, ask, row_bytes,
                  out);
    }
  }
}

int nk_attend_span_avx512(const nk_attn *a, int64_t p_begin, int64_t p_end, float *scratch,
                           float *part) {
  const int64_t d = a->head_dim, n_kv = a->n_kv_heads, g_n = a->n_heads / n_kv;
  const int64_t n_rows = a->n_tokens * g_n;
  if (d % 16 != 0 || d > MAX_DIM || n_rows > NK_ATTN_SPLIT_ROWS) return 0;
  const int64_t row_bytes = nk_kv_head_bytes(a->kv_type, d);
  /* A q8_0 or q4_0 cache is read by the integer steps (kern_avx512_attention_quant.h). */
  const int q4 = a->kv_type == NK_Q4_0;
  const int quant = (a->kv_type == NK_Q8_0 || q4) && d % 64 == 0;
  /* Each head's scores of the current tile, n_rows x NK_ATTN_TILE from head 0's. */
  float *scores = scratch + n_kv * nk_attn_split_head_floats(n_rows, d);
  /* Each position's row of kv head 0; head h's lies h rows further. */
  const uint8_t *krows[SPAN_TILE + 16], *vrows[SPAN_TILE];
  const uint8_t *knext[SPAN_TILE], *vnext[SPAN_TILE];
  int64_t start, len;
  nk_attn_seen(a, 0, a->n_tokens, &start, &len);
  const int64_t lo = start > p_begin ? start : p_begin, hi = len < p_end ? len : p_end;
  for (int64_t h = 0; h < n_kv; h++) {
    const head_state s = head_at(scratch, h, n_rows, d);
    /* Row r is head r % g_n of token r / g_n: the group's heads are adjacent in q. */
    for (int64_t t = 0; t < a->n_tokens; t++) {
      memcpy(s.q + t * g_n * d, a->q + (t * a->n_heads + h * g_n) * d, (size_t)(g_n * d) * 4);
    }
    for (int64_t i = 0; i < n_rows * d; i++) s.acc[i] = 0.0f;
    for (int64_t r = 0; r < n_rows; r++) {
      s.run_max[r] = -INFINITY;
      s.run_sum[r] = 0.0f;
      if (quant) q8_query_put(s.q + r * d, d, s.q8 + r * (d / 64));
    }
  }
  if (lo < hi) {
    const int64_t n = hi - lo < SPAN_TILE ? hi - lo : SPAN_TILE;
    tile_rows(a, a->k_cache, lo, n, 0, row_bytes, 0, knext);
    tile_rows(a, a->v_cache, lo, n, 0, row_bytes, 0, vnext);
    /* A span's last tile requests the next span's first (which this thread most likely
     * takes next: attention.c hands each thread a run of consecutive spans), so only the
     * sequence's first span finds nothing requested, and asks for its first tile itself.
     * Into L2: into L1 the 64 KiB would evict each other and the span's scratch. A request
     * for every span's first tile, into L1 as before, cost 8k positions 5% (2 threads,
     * 28 layers, libraries alternated). */
    if (lo == start) {
      for (int64_t j = 0; j < n; j++) {
        prefetch_row_l2(knext[j], n_kv * row_bytes);
        prefetch_row_l2(vnext[j], n_kv * row_bytes);
      }
    }
  }
  /* How far the tiles' requests go: the span's positions and the next span's first tile. */
  const int64_t reach = len < hi + SPAN_TILE ? len : hi + SPAN_TILE;
  for (int64_t p0 = lo; p0 < hi; p0 += SPAN_TILE) {
    const int64_t n = hi - p0 < SPAN_TILE ? hi - p0 : SPAN_TILE;
    const int64_t p1 = p0 + n, ahead = reach - p1 < SPAN_TILE ? reach - p1 : SPAN_TILE;
    memcpy(krows, knext, (size_t)n * sizeof(krows[0]));
    memcpy(vrows, vnext, (size_t)n * sizeof(vrows[0]));
    if (ahead > 0) {
      tile_rows(a, a->k_cache, p1, ahead, 0, row_bytes, 0, knext);
      tile_rows(a, a->v_cache, p1, ahead, 0, row_bytes, 0, vnext);
    }
    const int64_t n_next = ahead > 0 ? ahead : 0;
    for (int64_t h = 0; h < n_kv; h++) {
      const head_state s = head_at(scratch, h, n_rows, d);
      const int64_t off = h * row_bytes;
      span_scores(a, s, n_rows, quant, q4, krows, off, n, knext, n_next, row_bytes,
                  scores + h * n_rows * NK_ATTN_TILE);
    }
    span_weights(a, scratch, g_n, n_rows, n_kv, p0, n, scores);
    for (int64_t h = 0; h < n_kv; h++) {
      const head_state s = head_at(scratch, h, n_rows, d);
      const int64_t off = h * row_bytes;
      const float *hs = scores + h * n_rows * NK_ATTN_TILE;
      if (quant) {
        q8_tile_weighted_sum(a, g_n, n_rows, p0, n, hs, vrows, off, q4, s.acc, vnext, n_next,
                             row_bytes);
      } else {
        tile_weighted_sum(a, 0, g_n, n_rows, p0, n, hs, vrows, off, a->kv_type, s.acc, vnext,
                          n_next, row_bytes);
      }
    }
  }
  for (int64_t h = 0; h < n_kv; h++) {
    const head_state s = head_at(scratch, h, n_rows, d);
    for (int64_t r = 0; r < n_rows; r++) {
      const int64_t row = (r / g_n) * a->n_heads + h * g_n + r % g_n;
      if (part) {
        nk_attn_part_put(part, row, d, s.run_max[r], s.run_sum[r], s.acc + r * d);
      } else {
        float *out = a->out + row * d;
        const float inv = 1.0f / s.run_sum[r];
        for (int64_t i = 0; i < d; i++) out[i] = s.acc[r * d + i] * inv;
      }
    }
  }
  return 1;
}
