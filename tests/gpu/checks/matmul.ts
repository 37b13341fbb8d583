/**
 * Matrix products of every weight type against the reference, at odd shapes that reach
 * every kernel path: one and several tokens (1, 3, 8), more than one launch takes (11),
 * many tokens (20: cuBLAS when loaded), narrow and wide rows (each threads-per-row
 * setting), and widths the vectorised float kernels cannot take.
 *
 * The reference is given exactly the operands the device path computes with (activations
 * rounded through q8_1 for quantized weights, weights and activations through f16 for
 * cuBLAS), so what remains is summation order and the bounds can be tight: a wrong bit,
 * scale or offset anywhere shows.
 */

import { type Both, type Pair, randomF32, source, typeNamed } from "./pair.ts";
import type { Weight } from "../../../src/backend/backend.ts";
import { dequantizeRow } from "../../../src/gguf/dequant/mod.ts";
import { f16ToF32, f32ToF16 } from "../../../src/gguf/half.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { randomBlocks } from "../../../src/gguf/quant/random.ts";
import { GEMM_MIN_TOKENS } from "../../../src/backend/cuda/matmul_plan.ts";

export const MATMUL_TYPES = [
  "F32",
  "F16",
  "BF16",
  "Q4_0",
  "Q4_1",
  "Q5_0",
  "Q5_1",
  "Q8_0",
  "Q2_K",
  "Q3_K",
  "Q4_K",
  "Q5_K",
  "Q6_K",
] as const;

export type MatmulType = (typeof MATMUL_TYPES)[number];

/** Relative error bound (max error / output RMS) once operands are matched. */
export const MATMUL_BOUND = 1e-4;

type Path = "float" | "q8" | "gemm";

function pathOf(type: GgmlTypeInfo, tokens: number, cublas: boolean): Path {
  if (cublas && tokens >= GEMM_MIN_TOKENS) return "gemm";
  return type.blockSize === 1 ? "float" : "q8";
}

/** Widths per type: narrow, and wide enough for 64 and 128 threads per row. */
function widths(type: GgmlTypeInfo): number[] {
  if (type.blockSize === 256) return [768, 8192, 16384];
  if (type.blockSize === 32) return [160, 4128];
  return [72, 35, 2056];
}

export const MATMUL_TOKENS = [1, 3, 8, 11, 20];

const half = (v: number): number => f16ToF32(f32ToF16(v));

/** Round half away from zero, as C's roundf. */
function roundf(v: number): number {
  return Math.sign(v) * Math.floor(Math.abs(v) + 0.5);
}

/** `x` as the q8_1 quantization the device computes with (per 32 values). */
export function q8Roundtrip(x: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < x.length / cols; r++) {
    for (let b = 0; b < cols; b += 32) {
      const base = r * cols + b;
      const n = Math.min(32, cols - b);
      let amax = 0;
      for (let i = 0; i < n; i++) amax = Math.max(amax, Math.abs(x[base + i]));
      const d = Math.fround(amax / 127);
      for (let i = 0; i < n; i++) {
        out[base + i] = amax === 0 ? 0 : roundf(Math.fround(x[base + i] / d)) * d;
      }
    }
  }
  return out;
}

export interface MatmulResult {
  type: MatmulType;
  cols: number;
  tokens: number;
  path: Path;
  error: number;
}

/** Checks every width and token count of `type`; returns the errors seen. */
export function checkMatmul(pair: Pair, typeName: MatmulType, cublas: boolean): MatmulResult[] {
  const type = typeNamed(typeName);
  const f32 = ggmlTypeInfo(GgmlType.F32)!;
  const results: MatmulResult[] = [];
  for (const cols of widths(type)) {
    const rows = cols > 4096 ? 5 : 37;
    const bytes = randomBlocks(type, (rows * cols) / type.blockSize, pair.rng, 0.05);
    const dev = pair.dev.loadWeight(source("w", type, rows, cols, bytes));
    const exact = pair.ref.loadWeight(source("w", type, rows, cols, bytes));
    const values = new Float32Array(rows * cols);
    dequantizeRow(type, bytes, values);
    const halves = new Uint8Array(Float32Array.from(values, half).buffer);
    const rounded = pair.ref.loadWeight(source("w16", f32, rows, cols, halves));
    const w: Record<Path, Both<Weight>> = {
      float: { dev, ref: exact },
      q8: { dev, ref: exact },
      gemm: { dev, ref: rounded },
    };
    for (const tokens of MATMUL_TOKENS) {
      if (cols > 4096 && tokens > 8 && !cublas) continue;
      const path = pathOf(type, tokens, cublas);
      const data = randomF32(pair.rng, tokens * cols);
      const refData = path === "q8"
        ? q8Roundtrip(data, cols)
        : path === "gemm"
        ? Float32Array.from(data, half)
        : data;
      const x = pair.uploadEach(data, refData, tokens, cols);
      const out = pair.activation(tokens, rows);
      pair.dev.matmul(out.dev, w[path].dev, x.dev);
      pair.ref.matmul(out.ref, w[path].ref, x.ref);
      const what = `matmul ${typeName} ${rows}x${cols}, ${tokens} tokens (${path})`;
      const error = pair.check(what, out, MATMUL_BOUND);
      results.push({ type: typeName, cols, tokens, path, error });
      pair.dev.free(x.dev);
      pair.dev.free(out.dev);
    }
  }
  return results;
}
