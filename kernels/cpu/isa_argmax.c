/*
 * The largest value of a span of floats and its first index, NaN never winning: the scan
 * behind nk_argmax_rows (greedy decoding reads one index instead of a row of logits).
 */
#include "isa_common.h"

void NK_FN(nk_argmax_span)(const float *x, int64_t n, float *best, int64_t *at) {
  float bv = -__builtin_inff();
  int64_t bi = n;
  int64_t i = 0;
#if defined(__AVX512F__)
  /* Lane l keeps the best of the values at l mod 16; a lane still at the sentinel index
   * takes an equal value, so a run of -inf still yields its first index. */
  __m512 vbest = _mm512_set1_ps(bv);
  __m512i vat = _mm512_set1_epi32((int32_t)n);
  const __m512i sentinel = vat;
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  if (n < 0x7fffffff - 16) {
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      const __mmask16 take =
          _mm512_cmp_ps_mask(v, vbest, _CMP_GT_OQ) |
          (_mm512_cmp_ps_mask(v, vbest, _CMP_EQ_OQ) & _mm512_cmpeq_epi32_mask(vat, sentinel));
      vbest = _mm512_mask_blend_ps(take, vbest, v);
      vat = _mm512_mask_blend_epi32(take, vat, idx);
      idx = _mm512_add_epi32(idx, step);
    }
    float lanes[16];
    int32_t lane_at[16];
    _mm512_storeu_ps(lanes, vbest);
    _mm512_storeu_si512(lane_at, vat);
    for (int l = 0; l < 16; l++) {
      if (lane_at[l] == (int32_t)n) continue;
      if (bi == n || lanes[l] > bv || (lanes[l] == bv && lane_at[l] < bi)) {
        bv = lanes[l];
        bi = lane_at[l];
      }
    }
  }
#endif
  for (; i < n; i++) {
    if (x[i] > bv || (x[i] == bv && bi == n)) {
      bv = x[i];
      bi = i;
    }
  }
  *best = bv;
  *at = bi;
}
