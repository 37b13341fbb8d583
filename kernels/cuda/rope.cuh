/*
 * Rotary embedding as ggml computes it, shared by the plain `rope` kernel and the fused
 * rms_norm_rope so both turn every pair bitwise alike. Pair i of a head of `dim` features
 * turns by freq_scale * pos * base^(-2i/dim) / factor_i; NeoX pairs features (i, i + dim/2)
 * (Qwen, Gemma), NORM pairs (2i, 2i + 1) (Llama, Mistral).
 */
#pragma once

#include "common.cuh"

/* The spec of a rope, as the kernels take it. `factors` is NULL or dim / 2 divisors. */
struct RopeSpec {
  float base, freq_scale;
  const float *factors;
  int norm;
};

/* The angle of pair i at `pos`. The product is rounded to f32 before the factor and the
 * scale apply, in ggml's order. */
__device__ __forceinline__ float rope_angle(float pos, int i, int dim, const RopeSpec &r) {
  const float theta = pos * powf(r.base, -2.0f * (float)i / (float)dim);
  return r.freq_scale * (r.factors ? theta / r.factors[i] : theta);
}

/* The features pair i turns: rope_first(i), and that plus rope_gap. */
__device__ __forceinline__ int rope_first(int i, int norm) { return norm ? 2 * i : i; }
__device__ __forceinline__ int rope_gap(int dim, int norm) { return norm ? 1 : dim / 2; }

/* (a, b) turned by `angle`. */
__device__ __forceinline__ void rope_turn(float a, float b, float angle, float *ra, float *rb) {
  float s, c;
  sincosf(angle, &s, &c);
  *ra = a * c - b * s;
  *rb = a * s + b * c;
}
