/**
 * The Walsh-Hadamard rotation around a quantized KV cache: when a model applies it
 * (kvRotation) and which chunk sizes Backend.hadamard takes (hadamardProblem).
 */

import type { KvDType } from "./kv_cache.ts";

/**
 * The Walsh-Hadamard rotations (Backend.hadamard) a model applies around a cache of `dtype`,
 * as llama.cpp does by default (attn_rot_k/v in llama-kv-cache.cpp): a quantized cache
 * stores K and V rotated, so that an outlier feature spreads over its chunk instead of
 * setting the scale of its block and flattening the rest to zero. q and k turn by chunks of
 * `k` values (the largest power of two that divides head_dim), v by chunks of `v` (64), and
 * the attention output turns back by `v`. q.k is unchanged by a rotation of both, and the
 * weighted sum of rotated V rows rotates back, so only the quantization error changes.
 */
export interface KvRotation {
  k: number;
  v: number;
}

/** The rotations a cache of `dtype` with heads of `headDim` takes; null: none (f16, f32). */
export function kvRotation(dtype: KvDType, headDim: number): KvRotation | null {
  if ((dtype !== "q8_0" && dtype !== "q4_0") || headDim % 64 !== 0) return null;
  let k = 64;
  while (headDim % (2 * k) === 0) k *= 2;
  return { k, v: 64 };
}

/** Why chunks of `n` cannot rotate rows of `cols` values, or null. */
export function hadamardProblem(cols: number, n: number): string | null {
  if (!Number.isInteger(n) || n < 2 || (n & (n - 1)) !== 0) {
    return `chunk ${n} is not a power of two (2 or more)`;
  }
  if (cols % n !== 0) return `chunk ${n} does not divide rows of ${cols}`;
  return null;
}
