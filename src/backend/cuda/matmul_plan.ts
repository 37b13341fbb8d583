/**
 * How a matrix product is computed, from shapes and types alone (so equal steps record
 * equal launches): which mat-vec kernel, how many threads share a row, how many tokens per
 * launch, or cuBLAS for many tokens.
 */

import { GgmlType, type GgmlTypeInfo } from "../../gguf/types.ts";
import { MATVEC_TOKENS, TILED_EXPERT_TYPES } from "./kernels.ts";

/** Token count from which a product goes to cuBLAS (when loaded). */
export const GEMM_MIN_TOKENS = 16;
/** Most tokens one mat-vec launch takes. */
export const MATVEC_MAX_TOKENS = MATVEC_TOKENS[MATVEC_TOKENS.length - 1];
/** Bytes of f16 weight rows expanded at a time for cuBLAS. */
export const GEMM_TILE_BYTES = 64 * 1024 * 1024;

const QUANT_NAMES: Partial<Record<number, string>> = {
  [GgmlType.Q4_0]: "q4_0",
  [GgmlType.Q4_1]: "q4_1",
  [GgmlType.Q5_0]: "q5_0",
  [GgmlType.Q5_1]: "q5_1",
  [GgmlType.Q8_0]: "q8_0",
  [GgmlType.Q2_K]: "q2_k",
  [GgmlType.Q3_K]: "q3_k",
  [GgmlType.Q4_K]: "q4_k",
  [GgmlType.Q5_K]: "q5_k",
  [GgmlType.Q6_K]: "q6_k",
};

const FLOAT_NAMES: Partial<Record<number, string>> = {
  [GgmlType.F32]: "f32",
  [GgmlType.F16]: "f16",
  [GgmlType.BF16]: "bf16",
};

/** The types the CUDA backend computes (those of the CPU backend). */
export function supportedType(type: GgmlTypeInfo): boolean {
  return QUANT_NAMES[type.id] !== undefined || FLOAT_NAMES[type.id] !== undefined;
}

export type MatvecPlan =
  | { kind: "q8"; name: string; unitValues: number }
  | { kind: "float"; name: string; unitValues: number }
  | { kind: "any" };

/** The mat-vec family for a weight type and width. */
export function matvecPlan(type: GgmlTypeInfo, cols: number): MatvecPlan {
  const q = QUANT_NAMES[type.id];
  if (q !== undefined) {
    const unitValues = type.id === GgmlType.Q4_K || type.id === GgmlType.Q5_K ? 64 : 32;
    return { kind: "q8", name: q, unitValues };
  }
  const f = FLOAT_NAMES[type.id];
  if (f !== undefined && cols % 8 === 0) return { kind: "float", name: f, unitValues: 8 };
  return { kind: "any" };
}

/** Threads per row: enough that each has about two units, between a warp and the block. */
export function threadsPerRow(units: number): number {
  if (units >= 256) return 128;
  if (units >= 128) return 64;
  return 32;
}

/**
 * Threads per row of an expert product: threadsPerRow's, but 16 or 8 for rows of at most
 * 16 units, whose warps would leave lanes idle (qwen3-30b-a3b's Q4_K down projections,
 * 768 wide, are 12 units: 20 of 32 lanes idle).
 */
export function expertThreadsPerRow(units: number): number {
  if (units > 16) return threadsPerRow(units);
  return units > 8 ? 16 : 8;
}

/** The kernel instance for `n` tokens (1 <= n <= MATVEC_MAX_TOKENS). */
export function tokensInstance(n: number): number {
  return MATVEC_TOKENS.find((t) => t >= n) ?? MATVEC_MAX_TOKENS;
}

/** Columns of a quantized activation row: whole 256-value chunks, zero-padded. */
export function paddedCols(cols: number): number {
  return Math.ceil(cols / 256) * 256;
}

/**
 * Slots per chosen expert, on average, from which the tiled expert products (moe_gemm.cu)
 * beat the mat-vec ones: they unpack a weight once per 32 slots, so with fewer they work
 * for slots that are not there (a 16-stream decode step has about one per expert).
 */
export const TILED_MIN_SLOTS_PER_EXPERT = 8;

/** Whether `slots` (token, expert) rows over `experts` take the tiled expert product. */
export function expertsTiled(plan: MatvecPlan, slots: number, experts: number): boolean {
  return plan.kind === "q8" && TILED_EXPERT_TYPES.includes(plan.name) &&
    slots >= TILED_MIN_SLOTS_PER_EXPERT * experts;
}
