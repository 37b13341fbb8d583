/*
 * A loaded weight unit (vecdot.cuh) as the tiled products take it: its values as signed
 * int8 in activation order (four to a word), one scale per 16 values and one offset per 32,
 * so that a unit's dot with a q8_1 block b (scale dx, sum sx = dx * sum(q)) is
 *
 *   dx * (sc[2b] * dot(q[0..16), x[0..16)) + sc[2b + 1] * dot(q[16..32), x[16..32))) - mn[b] * sx
 *
 * the formula each unit's `dot` computes, regrouped. Q2_K has no tile: its offsets are
 * per 16 values, which the q8_1 sums do not give.
 */
#pragma once
#include "vecdot.cuh"

/* Bytes v - k for bytes v of 0 .. 2k - 1, k a power of two (4: Q3_K, 32: Q6_K): flip bit
 * k, and where it was clear the byte went below zero, so set the bits above it. */
template <int K>
__device__ __forceinline__ int signed_bytes(int q) {
  constexpr uint32_t BIT = K * 0x01010101u;
  constexpr uint32_t ABOVE = 256 / K - 2; /* BIT * ABOVE: the bits above k in each byte */
  const uint32_t u = (uint32_t)q;
  return (int)((u ^ BIT) | ((~u & BIT) * ABOVE));
}

/* Words of 4-bit values (two to a byte, the low nibbles first in activation order) as
 * bytes: the low nibbles' N words, then the high nibbles'. */
template <int N>
__device__ __forceinline__ void nibble_bytes(const int (&w)[N], int *q) {
#pragma unroll
  for (int i = 0; i < N; i++) q[i] = w[i] & 0x0F0F0F0F, q[i + N] = (w[i] >> 4) & 0x0F0F0F0F;
}

/* A unit whose values load as bytes already, its first half then its second. */
template <int N>
__device__ __forceinline__ void halves_bytes(const int (&lo)[N], const int (&hi)[N], int *q) {
#pragma unroll
  for (int i = 0; i < N; i++) q[i] = lo[i], q[i + N] = hi[i];
}

__device__ __forceinline__ void tile_of(const UnitQ4_0 &u, int q[8], float sc[2], float mn[1]) {
  nibble_bytes(u.q, q);
  sc[0] = sc[1] = u.d;
  mn[0] = 8.0f * u.d;
}

__device__ __forceinline__ void tile_of(const UnitQ4_1 &u, int q[8], float sc[2], float mn[1]) {
  nibble_bytes(u.q, q);
  sc[0] = sc[1] = u.d;
  mn[0] = -u.m;
}

__device__ __forceinline__ void tile_of(const UnitQ5_0 &u, int q[8], float sc[2], float mn[1]) {
  halves_bytes(u.lo, u.hi, q);
  sc[0] = sc[1] = u.d;
  mn[0] = 16.0f * u.d;
}

__device__ __forceinline__ void tile_of(const UnitQ5_1 &u, int q[8], float sc[2], float mn[1]) {
  halves_bytes(u.lo, u.hi, q);
  sc[0] = sc[1] = u.d;
  mn[0] = -u.m;
}

__device__ __forceinline__ void tile_of(const UnitQ8_0 &u, int q[8], float sc[2], float mn[1]) {
#pragma unroll
  for (int i = 0; i < 8; i++) q[i] = u.q[i];
  sc[0] = sc[1] = u.d;
  mn[0] = 0.0f;
}

/* Q3_K and Q6_K: values 0 .. 2k - 1 that mean v - k, a scale per 16 of them, no min. */
template <int K, class U>
__device__ __forceinline__ void signed_halves(const U &u, int q[8], float sc[2], float mn[1]) {
#pragma unroll
  for (int i = 0; i < 8; i++) q[i] = signed_bytes<K>(u.q[i]);
  sc[0] = u.d * (float)u.sc_lo;
  sc[1] = u.d * (float)u.sc_hi;
  mn[0] = 0.0f;
}

__device__ __forceinline__ void tile_of(const UnitQ3_K &u, int q[8], float sc[2], float mn[1]) {
  signed_halves<4>(u, q, sc, mn);
}

/* Q4_K and Q5_K: a unit is two 32-value sub-blocks, a and b, each with a scale and a min. */
template <class U>
__device__ __forceinline__ void k_pair_scales(const U &u, float sc[4], float mn[2]) {
  sc[0] = sc[1] = u.d * (float)u.sc_a;
  sc[2] = sc[3] = u.d * (float)u.sc_b;
  mn[0] = u.dmin * (float)u.m_a;
  mn[1] = u.dmin * (float)u.m_b;
}

__device__ __forceinline__ void tile_of(const UnitQ4_K &u, int q[16], float sc[4], float mn[2]) {
  nibble_bytes(u.q, q);
  k_pair_scales(u, sc, mn);
}

__device__ __forceinline__ void tile_of(const UnitQ5_K &u, int q[16], float sc[4], float mn[2]) {
  halves_bytes(u.lo, u.hi, q);
  k_pair_scales(u, sc, mn);
}

__device__ __forceinline__ void tile_of(const UnitQ6_K &u, int q[8], float sc[2], float mn[1]) {
  signed_halves<32>(u, q, sc, mn);
}
