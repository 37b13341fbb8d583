/*
 * Dot products of quantized weights with activations quantized to q8_1 (int8 per value,
 * per 32 values a scale d and s = d * sum(q)), with __dp4a. The unit of work is 32 weight
 * values (one q8_1 block), or 64 for Q4_K/Q5_K whose two sub-blocks share their bytes.
 * Each type's unit loads its weight bits once (`load`) and dots them with any number of
 * tokens (`dot`). Layouts and value formulas are those of quant.cuh's dequant_in_block.
 *
 * Activations of one token: `xq` int8[kp] (16-byte aligned, zero past the real columns)
 * and `xd` float2[kp / 32].
 */
#pragma once
#include "quant.cuh"

#define ONES4 0x01010101

__device__ __forceinline__ void ld_x8(const int8_t *xq, int blk, int x[8]) {
  const int4 a = ld_i128(xq + 32 * blk);
  const int4 b = ld_i128(xq + 32 * blk + 16);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

/* Spreads 4 bits (values 0..3 of a group) to bit 4 of each byte. */
__device__ __forceinline__ int spread4(uint32_t n) {
  return (int)(((n & 1) << 4) | ((n & 2) << 11) | ((n & 4) << 18) | ((n & 8) << 25));
}

struct UnitQ4_0 {
  static constexpr int VALUES = 32, BLOCK = 32, BYTES = 18;
  float d;
  int q[4];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * u;
    d = ld_f16(b);
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = ld_i32_a2(b + 2 + 4 * i);
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s = __dp4a(q[i] & 0x0F0F0F0F, x[i], s);
      s = __dp4a((q[i] >> 4) & 0x0F0F0F0F, x[i + 4], s);
    }
    const float2 ds = xd[u];
    return d * (ds.x * (float)s - 8.0f * ds.y);
  }
};

struct UnitQ4_1 {
  static constexpr int VALUES = 32, BLOCK = 32, BYTES = 20;
  float d, m;
  int q[4];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * u;
    d = ld_f16(b);
    m = ld_f16(b + 2);
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = ld_i32(b + 4 + 4 * i);
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s = __dp4a(q[i] & 0x0F0F0F0F, x[i], s);
      s = __dp4a((q[i] >> 4) & 0x0F0F0F0F, x[i + 4], s);
    }
    const float2 ds = xd[u];
    return d * ds.x * (float)s + m * ds.y;
  }
};

struct UnitQ5_0 {
  static constexpr int VALUES = 32, BLOCK = 32, BYTES = 22;
  float d;
  int lo[4], hi[4];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * u;
    d = ld_f16(b);
    const uint32_t qh = (uint32_t)ld_i32_a2(b + 2);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int q = ld_i32_a2(b + 6 + 4 * i);
      lo[i] = (q & 0x0F0F0F0F) | spread4((qh >> (4 * i)) & 0xF);
      hi[i] = ((q >> 4) & 0x0F0F0F0F) | spread4((qh >> (16 + 4 * i)) & 0xF);
    }
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s = __dp4a(lo[i], x[i], s);
      s = __dp4a(hi[i], x[i + 4], s);
    }
    const float2 ds = xd[u];
    return d * (ds.x * (float)s - 16.0f * ds.y);
  }
};

struct UnitQ5_1 {
  static constexpr int VALUES = 32, BLOCK = 32, BYTES = 24;
  float d, m;
  int lo[4], hi[4];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * u;
    d = ld_f16(b);
    m = ld_f16(b + 2);
    const uint32_t qh = (uint32_t)ld_i32(b + 4);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int q = ld_i32(b + 8 + 4 * i);
      lo[i] = (q & 0x0F0F0F0F) | spread4((qh >> (4 * i)) & 0xF);
      hi[i] = ((q >> 4) & 0x0F0F0F0F) | spread4((qh >> (16 + 4 * i)) & 0xF);
    }
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s = __dp4a(lo[i], x[i], s);
      s = __dp4a(hi[i], x[i + 4], s);
    }
    const float2 ds = xd[u];
    return d * ds.x * (float)s + m * ds.y;
  }
};

struct UnitQ8_0 {
  static constexpr int VALUES = 32, BLOCK = 32, BYTES = 34;
  float d;
  int q[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * u;
    d = ld_f16(b);
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] = ld_i32_a2(b + 2 + 4 * i);
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) s = __dp4a(q[i], x[i], s);
    return d * xd[u].x * (float)s;
  }
};

/* Q2_K, 32 values: half h of the block, shift j; values 0..15 and 16..31 have own scales. */
struct UnitQ2_K {
  static constexpr int VALUES = 32, BLOCK = 256, BYTES = 84;
  float d, dmin;
  int sc_lo, sc_hi;
  int q[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * (u >> 3);
    const int w = u & 7, h = w >> 2, j = w & 3;
    d = ld_f16(b + 80);
    dmin = ld_f16(b + 82);
    const int sc = ld_u16(b + 8 * h + 2 * j);
    sc_lo = sc & 0xFF;
    sc_hi = sc >> 8;
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] = (ld_i32(b + 16 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303;
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s_lo = 0, s_hi = 0, x_lo = 0, x_hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s_lo = __dp4a(q[i], x[i], s_lo);
      x_lo = __dp4a(ONES4, x[i], x_lo);
      s_hi = __dp4a(q[i + 4], x[i + 4], s_hi);
      x_hi = __dp4a(ONES4, x[i + 4], x_hi);
    }
    const float dx = xd[u].x;
    const float scaled = (float)((sc_lo & 0xF) * s_lo + (sc_hi & 0xF) * s_hi);
    const float mins = (float)((sc_lo >> 4) * x_lo + (sc_hi >> 4) * x_hi);
    return dx * (d * scaled - dmin * mins);
  }
};

/* Q3_K, 32 values: like Q2_K plus a high bit from hmask (set: +0, clear: -4). */
struct UnitQ3_K {
  static constexpr int VALUES = 32, BLOCK = 256, BYTES = 110;
  float d;
  int sc_lo, sc_hi;
  int q[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * (u >> 3);
    const int w = u & 7, h = w >> 2, j = w & 3;
    d = ld_f16(b + 108);
    q3k_scale_pair(8 * h + 2 * j, b + 96, sc_lo, sc_hi);
    sc_lo -= 32;
    sc_hi -= 32;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int low = (ld_i32_a2(b + 32 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303;
      const int high = (ld_i32_a2(b + 4 * i) >> (4 * h + j)) & ONES4;
      q[i] = low | (high << 2);
    }
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s_lo = 0, s_hi = 0, x_lo = 0, x_hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s_lo = __dp4a(q[i], x[i], s_lo);
      x_lo = __dp4a(ONES4, x[i], x_lo);
      s_hi = __dp4a(q[i + 4], x[i + 4], s_hi);
      x_hi = __dp4a(ONES4, x[i + 4], x_hi);
    }
    const int total = sc_lo * (s_lo - 4 * x_lo) + sc_hi * (s_hi - 4 * x_hi);
    return d * xd[u].x * (float)total;
  }
};

/* Q4_K, 64 values: sub-blocks 2j (low nibbles) and 2j+1 (high nibbles) of one qs chunk. */
struct UnitQ4_K {
  static constexpr int VALUES = 64, BLOCK = 256, BYTES = 144;
  float d, dmin;
  int sc_a, m_a, sc_b, m_b;
  int q[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * (u >> 2);
    const int j = u & 3;
    d = ld_f16(b);
    dmin = ld_f16(b + 2);
    const uint32_t s0 = ld_i32(b + 4), s1 = ld_i32(b + 8), s2 = ld_i32(b + 12);
    k4_scale_min_w(2 * j, s0, s1, s2, sc_a, m_a);
    k4_scale_min_w(2 * j + 1, s0, s1, s2, sc_b, m_b);
    const int4 v0 = ld_i128(b + 16 + 32 * j);
    const int4 v1 = ld_i128(b + 32 + 32 * j);
    q[0] = v0.x, q[1] = v0.y, q[2] = v0.z, q[3] = v0.w;
    q[4] = v1.x, q[5] = v1.y, q[6] = v1.z, q[7] = v1.w;
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int xa[8], xb[8];
    ld_x8(xq, 2 * u, xa);
    ld_x8(xq, 2 * u + 1, xb);
    int sa = 0, sb = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      sa = __dp4a(q[i] & 0x0F0F0F0F, xa[i], sa);
      sb = __dp4a((q[i] >> 4) & 0x0F0F0F0F, xb[i], sb);
    }
    const float2 da = xd[2 * u], db = xd[2 * u + 1];
    return d * ((float)sc_a * da.x * (float)sa + (float)sc_b * db.x * (float)sb) -
           dmin * ((float)m_a * da.y + (float)m_b * db.y);
  }
};

/* Q5_K, 64 values: Q4_K plus bit (2j or 2j+1) of qh[l] as the fifth bit. */
struct UnitQ5_K {
  static constexpr int VALUES = 64, BLOCK = 256, BYTES = 176;
  float d, dmin;
  int sc_a, m_a, sc_b, m_b;
  int lo[8], hi[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * (u >> 2);
    const int j = u & 3;
    d = ld_f16(b);
    dmin = ld_f16(b + 2);
    const uint32_t s0 = ld_i32(b + 4), s1 = ld_i32(b + 8), s2 = ld_i32(b + 12);
    k4_scale_min_w(2 * j, s0, s1, s2, sc_a, m_a);
    k4_scale_min_w(2 * j + 1, s0, s1, s2, sc_b, m_b);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int q = ld_i32(b + 48 + 32 * j + 4 * i);
      const int qh = ld_i32(b + 16 + 4 * i);
      lo[i] = (q & 0x0F0F0F0F) | (((qh >> (2 * j)) & ONES4) << 4);
      hi[i] = ((q >> 4) & 0x0F0F0F0F) | (((qh >> (2 * j + 1)) & ONES4) << 4);
    }
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int xa[8], xb[8];
    ld_x8(xq, 2 * u, xa);
    ld_x8(xq, 2 * u + 1, xb);
    int sa = 0, sb = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      sa = __dp4a(lo[i], xa[i], sa);
      sb = __dp4a(hi[i], xb[i], sb);
    }
    const float2 da = xd[2 * u], db = xd[2 * u + 1];
    return d * ((float)sc_a * da.x * (float)sa + (float)sc_b * db.x * (float)sb) -
           dmin * ((float)m_a * da.y + (float)m_b * db.y);
  }
};

/* Q6_K, 32 values: half h, quarter k; 4 low bits from ql, 2 high from qh, minus 32. */
struct UnitQ6_K {
  static constexpr int VALUES = 32, BLOCK = 256, BYTES = 210;
  float d;
  int sc_lo, sc_hi;
  int q[8];
  __device__ __forceinline__ void load(const uint8_t *row, int u) {
    const uint8_t *b = row + BYTES * (u >> 3);
    const int w = u & 7, h = w >> 2, k = w & 3;
    d = ld_f16(b + 208);
    const int sc = ld_u16(b + 192 + 8 * h + 2 * k);
    sc_lo = (int8_t)(sc & 0xFF);
    sc_hi = (int8_t)(sc >> 8);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int l = ld_i32_a2(b + 64 * h + 32 * (k & 1) + 4 * i);
      const int nib = (k < 2 ? l : (l >> 4)) & 0x0F0F0F0F;
      const int hb = (ld_i32_a2(b + 128 + 32 * h + 4 * i) >> (2 * k)) & 0x03030303;
      q[i] = nib | (hb << 4);
    }
  }
  __device__ __forceinline__ float dot(const int8_t *xq, const float2 *xd, int u) const {
    int x[8];
    ld_x8(xq, u, x);
    int s_lo = 0, s_hi = 0, x_lo = 0, x_hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      s_lo = __dp4a(q[i], x[i], s_lo);
      x_lo = __dp4a(ONES4, x[i], x_lo);
      s_hi = __dp4a(q[i + 4], x[i + 4], s_hi);
      x_hi = __dp4a(ONES4, x[i + 4], x_hi);
    }
    const int total = sc_lo * (s_lo - 32 * x_lo) + sc_hi * (s_hi - 32 * x_hi);
    return d * xd[u].x * (float)total;
  }
};

/*
 * A fused gate/up product's outputs at `at`: the raw products, as the two product launches
 * leave them, then silu(gate) * up by silu_mul's formula (y may be gout: written last).
 */
__device__ __forceinline__ void store_gate_up(float *y, float *gout, float *uout, size_t at,
                                              float g, float u) {
  gout[at] = g;
  uout[at] = u;
  y[at] = g / (1.0f + expf(-g)) * u;
}
