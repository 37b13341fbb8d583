/** Quantizers for the plain float types: F32 (a copy), F16 and BF16 (round to nearest even). */

import { f32ToBf16, f32ToF16 } from "../half.ts";

export function quantizeF32(src: Float32Array, dst: Uint8Array, n: number): void {
  dst.set(new Uint8Array(src.buffer, src.byteOffset, n * 4));
}

export function quantizeF16(src: Float32Array, dst: Uint8Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const h = f32ToF16(src[i]);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}

export function quantizeBf16(src: Float32Array, dst: Uint8Array, n: number): void {
  for (let i = 0; i < n; i++) {
    const h = f32ToBf16(src[i]);
    dst[2 * i] = h & 0xff;
    dst[2 * i + 1] = h >>> 8;
  }
}
