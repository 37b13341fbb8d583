/**
 * Reference dequantizers for ggml's 32-value block types, mirroring `dequantize_row_q*`
 * in ggml-quants.c value for value: products and sums are rounded to f32 exactly where
 * the C code rounds them (`Math.fround`, or the store into a Float32Array).
 */

import { F16_TABLE } from "../half.ts";
import { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, QK, u16At } from "../blocks.ts";

export function dequantizeQ4_0(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q4_0.size;
    const d = F16_TABLE[u16At(src, b + Q4_0.d)];
    const y = i * QK;
    for (let j = 0; j < QK / 2; j++) {
      const q = src[b + Q4_0.qs + j];
      dst[y + j] = ((q & 0x0f) - 8) * d;
      dst[y + j + QK / 2] = ((q >> 4) - 8) * d;
    }
  }
}

export function dequantizeQ4_1(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q4_1.size;
    const d = F16_TABLE[u16At(src, b + Q4_1.d)];
    const m = F16_TABLE[u16At(src, b + Q4_1.m)];
    const y = i * QK;
    for (let j = 0; j < QK / 2; j++) {
      const q = src[b + Q4_1.qs + j];
      dst[y + j] = Math.fround((q & 0x0f) * d) + m;
      dst[y + j + QK / 2] = Math.fround((q >> 4) * d) + m;
    }
  }
}

/** Bit j of the 32-bit `qh` is the fifth bit of value j. */
function qhAt(src: Uint8Array, o: number): number {
  return (src[o] | (src[o + 1] << 8) | (src[o + 2] << 16) | (src[o + 3] << 24)) >>> 0;
}

export function dequantizeQ5_0(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q5_0.size;
    const d = F16_TABLE[u16At(src, b + Q5_0.d)];
    const qh = qhAt(src, b + Q5_0.qh);
    const y = i * QK;
    for (let j = 0; j < QK / 2; j++) {
      const q = src[b + Q5_0.qs + j];
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + QK / 2)) & 1) << 4;
      dst[y + j] = (((q & 0x0f) | h0) - 16) * d;
      dst[y + j + QK / 2] = (((q >> 4) | h1) - 16) * d;
    }
  }
}

export function dequantizeQ5_1(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q5_1.size;
    const d = F16_TABLE[u16At(src, b + Q5_1.d)];
    const m = F16_TABLE[u16At(src, b + Q5_1.m)];
    const qh = qhAt(src, b + Q5_1.qh);
    const y = i * QK;
    for (let j = 0; j < QK / 2; j++) {
      const q = src[b + Q5_1.qs + j];
      const h0 = ((qh >>> j) & 1) << 4;
      const h1 = ((qh >>> (j + QK / 2)) & 1) << 4;
      dst[y + j] = Math.fround(((q & 0x0f) | h0) * d) + m;
      dst[y + j + QK / 2] = Math.fround(((q >> 4) | h1) * d) + m;
    }
  }
}

export function dequantizeQ8_0(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q8_0.size;
    const d = F16_TABLE[u16At(src, b + Q8_0.d)];
    const y = i * QK;
    for (let j = 0; j < QK; j++) dst[y + j] = ((src[b + Q8_0.qs + j] << 24) >> 24) * d;
  }
}
