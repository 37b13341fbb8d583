/*
 * Rotary embedding as ggml computes it, shared by the plain `rope` kernel and the fused
 * rms_norm_rope so both turn every pair bitwise alike. Pair i of a head of `dim` features
 * turns by freq_scale * pos * base^(-2i/dim) / factor_i, or under YaRN by a mix of that and
 * the unscaled angle (ggml's rope_yarn), cos and sin then scaled by mscale; NeoX pairs
 * features (i, i + dim/2) (Qwen, Gemma), NORM pairs (2i, 2i + 1) (Llama, Mistral).
 */
#pragma once

#include "common.cuh"

/* The spec of a rope, as the kernels take it. `factors` is NULL or dim / 2 divisors;
 * ext_factor 0 and mscale 1: no YaRN. */
struct RopeSpec {
  float base, freq_scale, ext_factor, corr_low, corr_high, mscale;
  const float *factors;
  int norm;
};

/* The angle of pair i at `pos`. The product is rounded to f32 before the factor and the
 * scale apply, in ggml's order; YaRN's ramp keeps the fast pairs (below corr_low) at the
 * extrapolated angle and moves linearly to the interpolated one at corr_high. */
__device__ __forceinline__ float rope_angle(float pos, int i, int dim, const RopeSpec &r) {
  const float theta = pos * powf(r.base, -2.0f * (float)i / (float)dim);
  const float extrap = r.factors ? theta / r.factors[i] : theta;
  const float interp = r.freq_scale * extrap;
  if (r.ext_factor == 0.0f) return interp;
  const float y = ((float)i - r.corr_low) / fmaxf(0.001f, r.corr_high - r.corr_low);
  const float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * r.ext_factor;
  return interp * (1.0f - mix) + extrap * mix;
}

/* The features pair i turns: rope_first(i), and that plus rope_gap. */
__device__ __forceinline__ int rope_first(int i, int norm) { return norm ? 2 * i : i; }
__device__ __forceinline__ int rope_gap(int dim, int norm) { return norm ? 1 : dim / 2; }

/* (a, b) turned by `angle` and scaled by the spec's mscale. */
__device__ __forceinline__ void rope_turn(float a, float b, float angle, const RopeSpec &r,
                                          float *ra, float *rb) {
  float s, c;
  sincosf(angle, &s, &c);
  c *= r.mscale;
  s *= r.mscale;
  *ra = a * c - b * s;
  *rb = a * s + b * c;
}
