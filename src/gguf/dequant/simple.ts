/** Dequantizers for the plain float types: F32 (a copy), F16 and BF16 (exact widening). */

import { F16_TABLE } from "../half.ts";

/** Copies `n` little-endian f32 values; GGUF and every host Deno runs on are little-endian. */
export function dequantizeF32(src: Uint8Array, dst: Float32Array, n: number): void {
  new Uint8Array(dst.buffer, dst.byteOffset, n * 4).set(src.subarray(0, n * 4));
}

export function dequantizeF16(src: Uint8Array, dst: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) dst[i] = F16_TABLE[src[2 * i] | (src[2 * i + 1] << 8)];
}

/** bf16 is the top half of an f32: its bits go to the high u16 of each (little-endian) f32. */
export function dequantizeBf16(src: Uint8Array, dst: Float32Array, n: number): void {
  const halves = new Uint16Array(dst.buffer, dst.byteOffset, 2 * n);
  for (let i = 0; i < n; i++) {
    halves[2 * i] = 0;
    halves[2 * i + 1] = src[2 * i] | (src[2 * i + 1] << 8);
  }
}
