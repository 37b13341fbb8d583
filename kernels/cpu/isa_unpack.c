/*
 * Activation quantization and the unpacking of every quantized type into the chunk form
 * (nk_internal.h). Written as plain loops over contiguous bytes so that each dispatch
 * level's compiler flags vectorize them.
 */
#include "dequant_ref.h"
#include "isa_common.h"

#if defined(__AVX512F__)
/* One block of 32: the arithmetic of the portable loop below, sixteen lanes at a time
 * (same scale, same round-half-away-from-zero), so every level quantizes alike. */
static inline void quantize_block(const float *xb, int8_t *qb, float *d16, float *s16, float *d32,
                                  float *s32) {
  const __m512 a = _mm512_loadu_ps(xb), b = _mm512_loadu_ps(xb + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
  const float d = amax / 127.0f;
  const __m512 id = _mm512_set1_ps(nk_act_inverse(d));
  const __m512i qa = nk_act_round16(a, id), qv = nk_act_round16(b, id);
  _mm_storeu_si128((__m128i *)qb, _mm512_cvtepi32_epi8(qa));
  _mm_storeu_si128((__m128i *)(qb + 16), _mm512_cvtepi32_epi8(qv));
  const float lo = d * (float)_mm512_reduce_add_epi32(qa);
  const float hi = d * (float)_mm512_reduce_add_epi32(qv);
  d32[0] = d16[0] = d16[1] = d;
  s16[0] = lo;
  s16[1] = hi;
  s32[0] = lo + hi;
}
#else
static inline void quantize_block(const float *xb, int8_t *qb, float *d16, float *s16, float *d32,
                                  float *s32) {
  float lanes[16] = {0};
  for (int i = 0; i < 32; i++) {
    const float a = xb[i] < 0 ? -xb[i] : xb[i];
    lanes[i & 15] = lanes[i & 15] > a ? lanes[i & 15] : a;
  }
  float amax = 0.0f;
  for (int i = 0; i < 16; i++) amax = amax > lanes[i] ? amax : lanes[i];
  const float d = amax / 127.0f;
  const float id = nk_act_inverse(d);
  int32_t sum_lo = 0, sum_hi = 0;
  for (int i = 0; i < 32; i++) qb[i] = nk_act_round(xb[i], id);
  for (int i = 0; i < 16; i++) {
    sum_lo += qb[i];
    sum_hi += qb[i + 16];
  }
  d32[0] = d16[0] = d16[1] = d;
  s16[0] = d * (float)sum_lo;
  s16[1] = d * (float)sum_hi;
  s32[0] = s16[0] + s16[1];
}
#endif

void NK_FN(nk_quantize_act)(const float *x, int64_t cols, int64_t kp, int8_t *q, float *d16,
                            float *s16, float *d32, float *s32) {
  for (int64_t b = 0; b < kp / 32; b++) {
    int8_t *qb = q + b * 32;
    if (b * 32 >= cols) {
      memset(qb, 0, 32);
      d32[b] = s32[b] = 0.0f;
      d16[2 * b] = d16[2 * b + 1] = s16[2 * b] = s16[2 * b + 1] = 0.0f;
      continue;
    }
    quantize_block(x + b * 32, qb, d16 + 2 * b, s16 + 2 * b, d32 + b, s32 + b);
  }
}

/* Legacy 32-blocks: the chunk holds blocks [8 * chunk, 8 * chunk + 8) of the row. */
static void unpack_legacy(int32_t type, const uint8_t *row, int64_t chunk, int64_t cols,
                          nk_chunk *c) {
  const nk_traits *tr = nk_type_traits(type);
  const int64_t b0 = chunk * 8;
  int64_t nb = cols / 32 - b0;
  if (nb > 8) nb = 8;
  for (int64_t j = 0; j < nb; j++) {
    const uint8_t *blk = row + (b0 + j) * tr->type_size;
    uint8_t *u = c->u + 32 * j;
    float d, m;
    uint16_t h;
    memcpy(&h, blk, 2);
    d = nk_f16(h);
    switch (type) {
      case NK_Q4_0: {
        const nk_block_q4_0 *x = (const nk_block_q4_0 *)blk;
        for (int l = 0; l < 16; l++) {
          u[l] = x->qs[l] & 0x0F;
          u[l + 16] = x->qs[l] >> 4;
        }
        m = -8.0f * d;
        break;
      }
      case NK_Q4_1: {
        const nk_block_q4_1 *x = (const nk_block_q4_1 *)blk;
        for (int l = 0; l < 16; l++) {
          u[l] = x->qs[l] & 0x0F;
          u[l + 16] = x->qs[l] >> 4;
        }
        m = nk_f16(x->m);
        break;
      }
      case NK_Q5_0:
      case NK_Q5_1: {
        const int one = type == NK_Q5_1;
        const uint8_t *qs = blk + (one ? 8 : 6);
        uint32_t qh;
        memcpy(&qh, blk + (one ? 4 : 2), 4);
        for (int l = 0; l < 16; l++) {
          u[l] = (uint8_t)((qs[l] & 0x0F) | (((qh >> l) << 4) & 0x10));
          u[l + 16] = (uint8_t)((qs[l] >> 4) | ((qh >> (l + 12)) & 0x10));
        }
        if (one) {
          memcpy(&h, blk + 2, 2);
          m = nk_f16(h);
        } else {
          m = -16.0f * d;
        }
        break;
      }
      default: { /* Q8_0 */
        const nk_block_q8_0 *x = (const nk_block_q8_0 *)blk;
        for (int l = 0; l < 32; l++) u[l] = (uint8_t)x->qs[l] ^ 0x80;
        m = -128.0f * d;
        break;
      }
    }
    c->s[2 * j] = c->s[2 * j + 1] = d;
    c->m[2 * j] = c->m[2 * j + 1] = m;
  }
  for (int64_t j = nb; j < 8; j++) {
    memset(c->u + 32 * j, 0, 32);
    c->s[2 * j] = c->s[2 * j + 1] = c->m[2 * j] = c->m[2 * j + 1] = 0.0f;
  }
}

static void unpack_q2_k(const nk_block_q2_k *x, nk_chunk *c) {
  const float d = nk_f16(x->d), dmin = nk_f16(x->dmin);
  for (int n = 0; n < 2; n++) {
    for (int j = 0; j < 4; j++) {
      for (int l = 0; l < 32; l++) c->u[128 * n + 32 * j + l] = (x->qs[32 * n + l] >> (2 * j)) & 3;
    }
  }
  for (int g = 0; g < 16; g++) {
    c->s[g] = d * (float)(x->scales[g] & 0xF);
    c->m[g] = -(dmin * (float)(x->scales[g] >> 4));
  }
}

static void unpack_q3_k(const nk_block_q3_k *x, nk_chunk *c) {
  const float d = nk_f16(x->d);
  int8_t sc[16];
  nk_q3_k_scales(x->scales, sc);
  for (int n = 0; n < 2; n++) {
    for (int j = 0; j < 4; j++) {
      const int hb = 4 * n + j;
      for (int l = 0; l < 32; l++) {
        c->u[128 * n + 32 * j + l] =
            (uint8_t)(((x->qs[32 * n + l] >> (2 * j)) & 3) | (((x->hmask[l] >> hb) & 1) << 2));
      }
    }
  }
  for (int g = 0; g < 16; g++) {
    c->s[g] = d * (float)(sc[g] - 32);
    c->m[g] = -4.0f * c->s[g];
  }
}

static void unpack_q45_k(int32_t type, const uint8_t *blk, nk_chunk *c) {
  const nk_block_q4_k *x4 = (const nk_block_q4_k *)blk;
  const nk_block_q5_k *x5 = (const nk_block_q5_k *)blk;
  const float d = nk_f16(x4->d), dmin = nk_f16(x4->dmin);
  const uint8_t *qs = type == NK_Q4_K ? x4->qs : x5->qs;
  for (int j = 0; j < 4; j++) {
    for (int l = 0; l < 32; l++) {
      c->u[64 * j + l] = qs[32 * j + l] & 0x0F;
      c->u[64 * j + 32 + l] = qs[32 * j + l] >> 4;
    }
  }
  if (type == NK_Q5_K) {
    for (int j = 0; j < 4; j++) {
      for (int l = 0; l < 32; l++) {
        c->u[64 * j + l] |= (uint8_t)(((x5->qh[l] >> (2 * j)) & 1) << 4);
        c->u[64 * j + 32 + l] |= (uint8_t)(((x5->qh[l] >> (2 * j + 1)) & 1) << 4);
      }
    }
  }
  for (int sb = 0; sb < 8; sb++) {
    uint8_t sc, mn;
    nk_k4_scale_min(sb, x4->scales, &sc, &mn);
    c->s[2 * sb] = c->s[2 * sb + 1] = d * (float)sc;
    c->m[2 * sb] = c->m[2 * sb + 1] = -(dmin * (float)mn);
  }
}

static void unpack_q6_k(const nk_block_q6_k *x, nk_chunk *c) {
  const float d = nk_f16(x->d);
  for (int n = 0; n < 2; n++) {
    const uint8_t *ql = x->ql + 64 * n;
    const uint8_t *qh = x->qh + 32 * n;
    uint8_t *u = c->u + 128 * n;
    for (int l = 0; l < 32; l++) {
      u[l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      u[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      u[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      u[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 16; g++) {
    c->s[g] = d * (float)x->scales[g];
    c->m[g] = -32.0f * c->s[g];
  }
}

void NK_FN(nk_unpack)(int32_t type, const uint8_t *row, int64_t chunk, int64_t cols, nk_chunk *c) {
  switch (type) {
    case NK_Q2_K: unpack_q2_k((const nk_block_q2_k *)row + chunk, c); break;
    case NK_Q3_K: unpack_q3_k((const nk_block_q3_k *)row + chunk, c); break;
    case NK_Q4_K: unpack_q45_k(type, row + chunk * 144, c); break;
    case NK_Q5_K: unpack_q45_k(type, row + chunk * 176, c); break;
    case NK_Q6_K: unpack_q6_k((const nk_block_q6_k *)row + chunk, c); break;
    default: unpack_legacy(type, row, chunk, cols, c); break;
  }
}
