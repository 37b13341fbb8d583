/*
 * AVX-512 (F/BW/VL/DQ + VNNI) kernels.
 *
 * Mat-vec (few tokens): types with a fused kernel (kern_avx512_decode.c,
 * kern_avx512_legacy.c) read GGUF blocks straight into registers. The others (Q2_K, Q3_K)
 * unpack each row chunk by chunk into L1 and dot it with up to four tokens' int8
 * activations by VPDPBUSD (u8 weights x s8 activations); int32 partial sums of 4 lanes
 * belong to one group of 16 and are scaled per lane.
 *
 * Mat-mat (many tokens): a panel of 32 rows is packed so that one 64-byte load holds four
 * consecutive columns of 16 rows; a 4-byte broadcast of one token's activations then feeds
 * VPDPBUSD for 16 rows at once. A 32-row x 6-token tile keeps 12 int32 and 12 f32
 * accumulators in registers; int32 sums are scaled into f32 once per group.
 */
#include "isa_common.h"
#include "kern_avx512.h"

#define QT 6 /* tokens per quantized mat-mat tile */
#define FT 8 /* tokens per float mat-mat tile */
/* Chunks ahead of the one being packed that each row prefetches: the sixteen rows of a
 * block stream at once, too many for the hardware prefetcher to follow alone. */
#define PACK_AHEAD 1

static inline __attribute__((always_inline)) void qdot_row(const nk_mm *mm, int64_t r, int64_t t0,
                                                           const int nt) {
  const int64_t kp = mm->kp, n_chunks = kp / NK_CHUNK;
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512i idx[4];
  for (int i = 0; i < 4; i++) {
    idx[i] = _mm512_set_epi32(4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 2, 4 * i + 2,
                              4 * i + 2, 4 * i + 2, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1,
                              4 * i, 4 * i, 4 * i, 4 * i);
  }
  __m512 acc[4];
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) acc[j] = _mm512_setzero_ps();
  nk_chunk c;
  for (int64_t ch = 0; ch < n_chunks; ch++) {
    nk_unpack_avx512(mm->type, row, ch, mm->cols, &c);
    const __m512 sv = _mm512_load_ps(c.s), mv = _mm512_load_ps(c.m);
    __m512i u[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) u[i] = _mm512_load_si512(c.u + 64 * i);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const int64_t t = t0 + j;
      const int8_t *xq = mm->act.q + t * kp + ch * NK_CHUNK;
      const __m512 d16 = _mm512_loadu_ps(mm->act.d16 + t * (kp / 16) + ch * NK_GROUPS);
      const __m512 s16 = _mm512_loadu_ps(mm->act.s16 + t * (kp / 16) + ch * NK_GROUPS);
      acc[j] = _mm512_fmadd_ps(mv, s16, acc[j]);
      const __m512 sx = _mm512_mul_ps(sv, d16);
#pragma GCC unroll 4
      for (int i = 0; i < 4; i++) {
        const __m512i dp =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[i], _mm512_loadu_si512(xq + 64 * i));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(idx[i], sx), acc[j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) mm->y[(t0 + j) * mm->rows + r] = _mm512_reduce_add_ps(acc[j]);
}

/* The kernels that take up to NK_ROW_TOKENS_WIDE tokens in one pass; the others take
 * NK_ROW_TOKENS at a time. */
static int wide_rows(const nk_mm *mm) {
  return mm->type == NK_Q8_0 || (mm->act.dk && (mm->type == NK_Q4_K || mm->type == NK_Q6_K));
}

void nk_qdot_rows_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  if (nt > NK_ROW_TOKENS && !wide_rows(mm)) {
    nk_qdot_rows_avx512(mm, r0, r1, t0, NK_ROW_TOKENS);
    nk_qdot_rows_avx512(mm, r0, r1, t0 + NK_ROW_TOKENS, nt - NK_ROW_TOKENS);
    return;
  }
  if (nk_qdot_q8k_avx512(mm, r0, r1, t0, nt) || nk_qdot_fused_avx512(mm, r0, r1, t0, nt) ||
      nk_qdot_legacy_avx512(mm, r0, r1, t0, nt)) {
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    nk_prefetch_row(mm, r);
    switch (nt) {
      case 1: qdot_row(mm, r, t0, 1); break;
      case 2: qdot_row(mm, r, t0, 2); break;
      case 3: qdot_row(mm, r, t0, 3); break;
      default: qdot_row(mm, r, t0, 4); break;
    }
  }
}

static inline __m512 load_w16(int32_t type, const uint8_t *row, int64_t k, __mmask16 mask) {
  if (type == NK_F32) return _mm512_maskz_loadu_ps(mask, (const float *)row + k);
  const __m256i h = _mm256_maskz_loadu_epi16(mask, (const uint16_t *)row + k);
  if (type == NK_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Rows r..r + R - 1 (R = 1 or 4) by tokens t0..t0 + nt - 1: each token's activations,
 * loaded once, meet the R rows. Every (row, token) sum takes the same steps whatever R, so
 * four rows at a time give the same bits as one. Four against one, alternating in one
 * process (2-core Zen 5 VM): F16 1024 x 1024 at 1-8 tokens 0.43-0.54x the time, 3072 x 1024
 * from memory 0.92x at one token and 0.56-0.71x at 4-8; F32 64 x 1024 0.51-0.70x. */
static inline __attribute__((always_inline)) void fdot_rows(const nk_mm *mm, int64_t r,
                                                            int64_t t0, const int nt,
                                                            const int R) {
  const uint8_t *row = mm->w + r * mm->row_bytes;
  __m512 acc[4][4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < mm->cols; k += 16) {
    const __mmask16 mask = mm->cols - k >= 16 ? 0xFFFF : (__mmask16)((1u << (mm->cols - k)) - 1);
    __m512 w[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) w[i] = load_w16(mm->type, row + i * mm->row_bytes, k, mask);
#pragma GCC unroll 4
    for (int j = 0; j < nt; j++) {
      const __m512 x = _mm512_maskz_loadu_ps(mask, mm->x + (t0 + j) * mm->cols + k);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(w[i], x, acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < nt; j++) {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      mm->y[(t0 + j) * mm->rows + r + i] = _mm512_reduce_add_ps(acc[i][j]);
    }
  }
}

/* fdot_rows for nt as a constant. */
static inline __attribute__((always_inline)) void fdot_rows_nt(const nk_mm *mm, int64_t r,
                                                               int64_t t0, int32_t nt,
                                                               const int R) {
  switch (nt) {
    case 1: fdot_rows(mm, r, t0, 1, R); break;
    case 2: fdot_rows(mm, r, t0, 2, R); break;
    case 3: fdot_rows(mm, r, t0, 3, R); break;
    default: fdot_rows(mm, r, t0, 4, R); break;
  }
}

void nk_fdot_rows_avx512(const nk_mm *mm, int64_t r0, int64_t r1, int64_t t0, int32_t nt) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) nk_prefetch_row(mm, r + i);
    fdot_rows_nt(mm, r, t0, nt, 4);
  }
  for (; r < r1; r++) {
    nk_prefetch_row(mm, r);
    fdot_rows_nt(mm, r, t0, nt, 1);
  }
}

/* y[t][r0 .. r0 + 32) for the rows that exist. */
static inline void store_tile(const nk_mm *mm, int64_t r0, int64_t t, __m512 lo, __m512 hi) {
  float *y = mm->y + t * mm->rows + r0;
  const int64_t rem = mm->rows - r0;
  if (rem >= 32) {
    _mm512_storeu_ps(y, lo);
    _mm512_storeu_ps(y + 16, hi);
  } else {
    const __mmask16 m0 = rem >= 16 ? 0xFFFF : (__mmask16)((1u << rem) - 1);
    const __mmask16 m1 = rem <= 16 ? 0 : (__mmask16)((1u << (rem - 16)) - 1);
    _mm512_mask_storeu_ps(y, m0, lo);
    _mm512_mask_storeu_ps(y + 16, m1, hi);
  }
}

static inline __attribute__((always_inline)) void qgemm_tile(const nk_mm *mm, int64_t r0,
                                                             const uint8_t *u, const float *s,
                                                             const float *m, int64_t t0,
                                                             const int nt, const int group) {
  const int64_t kp = mm->kp, n_groups = kp / group;
  const int8_t *xq[QT];
  const float *dx[QT], *xs[QT];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    xq[j] = mm->act.q + (t0 + j) * kp;
    dx[j] = group == 16 ? mm->act.d16 + (t0 + j) * (kp / 16) : mm->act.d32 + (t0 + j) * (kp / 32);
    xs[j] = group == 16 ? mm->act.s16 + (t0 + j) * (kp / 16) : mm->act.s32 + (t0 + j) * (kp / 32);
  }
  __m512 acc0[QT], acc1[QT];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) acc0[j] = acc1[j] = _mm512_setzero_ps();
  for (int64_t g = 0; g < n_groups; g++) {
    __m512i ip0[QT], ip1[QT];
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) ip0[j] = ip1[j] = _mm512_setzero_si512();
    const uint8_t *ug = u + g * group * 32;
#pragma GCC unroll 8
    for (int k4 = 0; k4 < group / 4; k4++) {
      const __m512i w0 = _mm512_load_si512(ug + k4 * 128);
      const __m512i w1 = _mm512_load_si512(ug + k4 * 128 + 64);
#pragma GCC unroll 8
      for (int j = 0; j < nt; j++) {
        int32_t xv;
        memcpy(&xv, xq[j] + g * group + 4 * k4, 4);
        const __m512i xb = _mm512_set1_epi32(xv);
        ip0[j] = _mm512_dpbusd_epi32(ip0[j], w0, xb);
        ip1[j] = _mm512_dpbusd_epi32(ip1[j], w1, xb);
      }
    }
    const __m512 s0 = _mm512_load_ps(s + g * 32), s1 = _mm512_load_ps(s + g * 32 + 16);
    const __m512 m0 = _mm512_load_ps(m + g * 32), m1 = _mm512_load_ps(m + g * 32 + 16);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const __m512 d = _mm512_set1_ps(dx[j][g]), xsum = _mm512_set1_ps(xs[j][g]);
      acc0[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ip0[j]), s0), d, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ip1[j]), s1), d, acc1[j]);
      acc0[j] = _mm512_fmadd_ps(m0, xsum, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(m1, xsum, acc1[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store_tile(mm, r0, t0 + j, acc0[j], acc1[j]);
}

#define QGEMM_CASES(group)                                      \
  switch (nt) {                                                 \
    case 1: qgemm_tile(mm, r0, u, s, m, t0, 1, group); break;   \
    case 2: qgemm_tile(mm, r0, u, s, m, t0, 2, group); break;   \
    case 3: qgemm_tile(mm, r0, u, s, m, t0, 3, group); break;   \
    case 4: qgemm_tile(mm, r0, u, s, m, t0, 4, group); break;   \
    case 5: qgemm_tile(mm, r0, u, s, m, t0, 5, group); break;   \
    default: qgemm_tile(mm, r0, u, s, m, t0, QT, group); break; \
  }

/* Sixteen rows of sixteen 4-byte units, `stride` bytes apart, into sixteen vectors:
 * vector i holds unit i of every row. */
static inline __attribute__((always_inline)) void transpose16(const uint8_t *p, int64_t stride,
                                                              __m512i out[16]) {
  __m512i v[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) v[i] = _mm512_load_si512(p + i * stride);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  /* Now each 128-bit lane L of v[4a + e] holds unit 4L + e of rows 4a .. 4a + 3. */
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; e++) {
    const __m512i x0 = _mm512_shuffle_i32x4(v[e], v[4 + e], 0x88);
    const __m512i x1 = _mm512_shuffle_i32x4(v[e], v[4 + e], 0xDD);
    const __m512i y0 = _mm512_shuffle_i32x4(v[8 + e], v[12 + e], 0x88);
    const __m512i y1 = _mm512_shuffle_i32x4(v[8 + e], v[12 + e], 0xDD);
    out[e] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    out[4 + e] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    out[8 + e] = _mm512_shuffle_i32x4(x0, y0, 0xDD);
    out[12 + e] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
  }
}

/* nk_pack_qpanel's layout (isa_pack.c, the plain reference) for 32 rows, sixteen at a
 * time: each row's chunk is unpacked into L1, then transposed sixteen rows by sixteen
 * 4-byte units in registers, so that every store is a whole vector where the reference
 * scatters one 4-byte store per row. Packing is most of a mat-mat call's cost below a few
 * dozen tokens. */
static void pack_qpanel(const nk_mm *mm, int64_t r0, uint8_t *u, float *s, float *m) {
  const int64_t n_chunks = mm->kp / NK_CHUNK;
  const int32_t per_chunk = NK_CHUNK / mm->tr->group, step = mm->tr->group / 16;
  const int64_t cb = (int64_t)mm->tr->type_size * NK_CHUNK / mm->tr->block_size;
  nk_chunk c[16];
  __m512i v[16];
  for (int h = 0; h < 2; h++) {
    const int64_t first = r0 + 16 * h;
    const int64_t nr = mm->rows - first >= 16 ? 16 : mm->rows - first > 0 ? mm->rows - first : 0;
    if (nr < 16) memset(&c[nr], 0, (size_t)(16 - nr) * sizeof(nk_chunk));
    for (int64_t ch = 0; ch < n_chunks; ch++) {
      for (int64_t r = 0; r < nr; r++) {
        const uint8_t *row = mm->w + (first + r) * mm->row_bytes;
        const uint8_t *ahead = row + (ch + PACK_AHEAD) * cb;
        for (int64_t o = 0; o < cb; o += 64) __builtin_prefetch(ahead + o, 0, 3);
        if (!nk_unpack_fused_avx512(mm, row, ch, &c[r])) {
          nk_unpack_avx512(mm->type, row, ch, mm->cols, &c[r]);
        }
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) {
        transpose16(c[0].u + 64 * q, sizeof(nk_chunk), v);
        uint8_t *dst = u + ((ch * 64 + 16 * q) * 32 + 16 * h) * 4;
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) _mm512_store_si512(dst + i * 128, v[i]);
      }
      transpose16((const uint8_t *)c[0].s, sizeof(nk_chunk), v);
      for (int32_t g = 0; g < per_chunk; g++) {
        _mm512_store_si512(s + (ch * per_chunk + g) * 32 + 16 * h, v[g * step]);
      }
      transpose16((const uint8_t *)c[0].m, sizeof(nk_chunk), v);
      for (int32_t g = 0; g < per_chunk; g++) {
        _mm512_store_si512(m + (ch * per_chunk + g) * 32 + 16 * h, v[g * step]);
      }
    }
  }
}

void nk_qgemm_panel_avx512(const nk_mm *mm, int64_t r0, void *scratch) {
  const int32_t group = mm->tr->group;
  uint8_t *u = scratch;
  float *s = (float *)(u + mm->kp * 32);
  float *m = s + mm->kp / group * 32;
  pack_qpanel(mm, r0, u, s, m);
  for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += QT) {
    const int64_t nt = mm->n_tokens - t0 < QT ? mm->n_tokens - t0 : QT;
    if (group == 16) {
      QGEMM_CASES(16)
    } else {
      QGEMM_CASES(32)
    }
  }
}

static inline __attribute__((always_inline)) void fgemm_tile(const nk_mm *mm, int64_t r0,
                                                             const float *w, int64_t t0,
                                                             const int nt) {
  __m512 acc0[FT], acc1[FT];
  const float *x[FT];
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) {
    acc0[j] = acc1[j] = _mm512_setzero_ps();
    x[j] = mm->x + (t0 + j) * mm->cols;
  }
  for (int64_t k = 0; k < mm->cols; k++) {
    const __m512 w0 = _mm512_load_ps(w + k * 32), w1 = _mm512_load_ps(w + k * 32 + 16);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
      const __m512 xb = _mm512_set1_ps(x[j][k]);
      acc0[j] = _mm512_fmadd_ps(w0, xb, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(w1, xb, acc1[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < nt; j++) store_tile(mm, r0, t0 + j, acc0[j], acc1[j]);
}

void nk_fgemm_panel_avx512(const nk_mm *mm, int64_t r0, void *scratch) {
  float *w = scratch;
  nk_pack_fpanel_avx512(mm, r0, 32, w);
  for (int64_t t0 = 0; t0 < mm->n_tokens; t0 += FT) {
    switch (mm->n_tokens - t0 < FT ? mm->n_tokens - t0 : FT) {
      case 1: fgemm_tile(mm, r0, w, t0, 1); break;
      case 2: fgemm_tile(mm, r0, w, t0, 2); break;
      case 3: fgemm_tile(mm, r0, w, t0, 3); break;
      case 4: fgemm_tile(mm, r0, w, t0, 4); break;
      case 5: fgemm_tile(mm, r0, w, t0, 5); break;
      case 6: fgemm_tile(mm, r0, w, t0, 6); break;
      case 7: fgemm_tile(mm, r0, w, t0, 7); break;
      default: fgemm_tile(mm, r0, w, t0, FT); break;
    }
  }
}
