/**
 * The KV cache types' quantizers as llama.cpp's CPU backend runs them (ggml's x86
 * quantize_row_q8_0, and quantize_row_q4_0_ref), in f32 arithmetic as the C does it: the
 * oracle for what a quantized cache holds, byte for byte.
 */

import { f32ToF16 } from "../../gguf/mod.ts";
import { dequantizeRow as dequantizeGguf } from "../../gguf/dequant/mod.ts";
import { GgmlType } from "../../gguf/types.ts";

const GGML_TYPE_IDS = { q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0 } as const;

export type KvQuant = "q8_0" | "q4_0";

/** Bytes per block of 32 values. */
export const KV_BLOCK_BYTES: Record<KvQuant, number> = { q8_0: 34, q4_0: 18 };

const f = Math.fround;

/** Nearest integer, halves to even (the x86 rounding ggml's q8_0 quantizer uses). */
function roundEven(x: number): number {
  const f = Math.floor(x), rest = x - f;
  if (rest !== 0.5) return rest < 0.5 ? f : f + 1;
  return f % 2 === 0 ? f : f + 1;
}

/** The blocks of `x` (a multiple of 32 values). */
export function quantizeRow(type: KvQuant, x: Float32Array): Uint8Array {
  const bytes = KV_BLOCK_BYTES[type];
  const out = new Uint8Array(x.length / 32 * bytes);
  const view = new DataView(out.buffer);
  for (let b = 0; b < x.length / 32; b++) {
    const v = x.subarray(32 * b, 32 * b + 32);
    let amax = 0, max = 0;
    for (const e of v) {
      if (amax < Math.abs(e)) [amax, max] = [Math.abs(e), e];
    }
    const d = type === "q8_0" ? f(amax / 127) : f(max / -8);
    // q8_0 as ggml's x86 quantize_row_q8_0 (127 / amax); q4_0 as its reference (1 / d).
    const id = type === "q8_0" ? (amax !== 0 ? f(127 / amax) : 0) : d !== 0 ? f(1 / d) : 0;
    view.setUint16(b * bytes, f32ToF16(d), true);
    for (let j = 0; j < (type === "q8_0" ? 32 : 16); j++) {
      if (type === "q8_0") {
        view.setInt8(b * bytes + 2 + j, roundEven(f(v[j] * id)));
      } else {
        const lo = Math.min(15, Math.trunc(f(f(v[j] * id) + 8.5)));
        const hi = Math.min(15, Math.trunc(f(f(v[16 + j] * id) + 8.5)));
        out[b * bytes + 2 + j] = lo | (hi << 4);
      }
    }
  }
  return out;
}

/** The values blocks of `type` stand for (through the GGUF reference dequantizers). */
export function dequantizeRow(type: KvQuant, q: Uint8Array): Float32Array {
  const out = new Float32Array(q.length / KV_BLOCK_BYTES[type] * 32);
  dequantizeGguf(GGML_TYPE_IDS[type], q, out);
  return out;
}

/** Values (a multiple of 32) as the q8_0 blocks they quantize to stand for. */
export function roundThroughQ8(x: Float32Array): Float32Array {
  return dequantizeRow("q8_0", quantizeRow("q8_0", x));
}
