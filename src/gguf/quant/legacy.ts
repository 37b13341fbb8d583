/**
 * Reference quantizers for ggml's 32-value block types, following `quantize_row_q*_ref`
 * in ggml-quants.c (the ones llama-quantize uses without an importance matrix), with f32
 * rounding where the C code stores a float.
 */

import { f32ToF16 } from "../half.ts";
import { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, QK, setU16 } from "../blocks.ts";

const f = Math.fround;

/** The value of largest magnitude (the first one on ties), sign kept. */
function signedAbsMax(x: Float32Array, o: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < QK; j++) {
    const v = x[o + j];
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

function minMax(x: Float32Array, o: number): [number, number] {
  let min = Infinity;
  let max = -Infinity;
  for (let j = 0; j < QK; j++) {
    min = Math.min(min, x[o + j]);
    max = Math.max(max, x[o + j]);
  }
  return [min, max];
}

export function quantizeQ4_0(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK, b = i * Q4_0.size;
    // The extreme value maps to -8, so the full signed range [-8, 7] is used.
    const d = f(signedAbsMax(x, o) / -8);
    const id = d ? f(1 / d) : 0;
    setU16(y, b + Q4_0.d, f32ToF16(d));
    for (let j = 0; j < QK / 2; j++) {
      const q0 = Math.min(15, Math.trunc(f(f(x[o + j] * id) + 8.5)));
      const q1 = Math.min(15, Math.trunc(f(f(x[o + j + QK / 2] * id) + 8.5)));
      y[b + Q4_0.qs + j] = q0 | (q1 << 4);
    }
  }
}

export function quantizeQ4_1(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK, b = i * Q4_1.size;
    const [min, max] = minMax(x, o);
    const d = f((max - min) / 15);
    const id = d ? f(1 / d) : 0;
    setU16(y, b + Q4_1.d, f32ToF16(d));
    setU16(y, b + Q4_1.m, f32ToF16(min));
    for (let j = 0; j < QK / 2; j++) {
      const q0 = Math.min(15, Math.trunc(f(f(f(x[o + j] - min) * id) + 0.5)));
      const q1 = Math.min(15, Math.trunc(f(f(f(x[o + j + QK / 2] - min) * id) + 0.5)));
      y[b + Q4_1.qs + j] = q0 | (q1 << 4);
    }
  }
}

/** Packs 32 five-bit values: low nibbles into qs, fifth bits into the 32-bit qh. */
function pack5(q: Int32Array, y: Uint8Array, qs: number, qh: number): void {
  let h = 0;
  for (let j = 0; j < QK / 2; j++) {
    y[qs + j] = (q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4);
    h |= ((q[j] >> 4) & 1) << j;
    h |= ((q[j + QK / 2] >> 4) & 1) << (j + QK / 2);
  }
  y[qh] = h & 0xff;
  y[qh + 1] = (h >>> 8) & 0xff;
  y[qh + 2] = (h >>> 16) & 0xff;
  y[qh + 3] = h >>> 24;
}

export function quantizeQ5_0(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const q = new Int32Array(QK);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK, b = i * Q5_0.size;
    const d = f(signedAbsMax(x, o) / -16);
    const id = d ? f(1 / d) : 0;
    setU16(y, b + Q5_0.d, f32ToF16(d));
    for (let j = 0; j < QK; j++) q[j] = Math.min(31, Math.trunc(f(f(x[o + j] * id) + 16.5)));
    pack5(q, y, b + Q5_0.qs, b + Q5_0.qh);
  }
}

export function quantizeQ5_1(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const q = new Int32Array(QK);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK, b = i * Q5_1.size;
    const [min, max] = minMax(x, o);
    const d = f((max - min) / 31);
    const id = d ? f(1 / d) : 0;
    setU16(y, b + Q5_1.d, f32ToF16(d));
    setU16(y, b + Q5_1.m, f32ToF16(min));
    for (let j = 0; j < QK; j++) q[j] = Math.trunc(f(f(f(x[o + j] - min) * id) + 0.5)) & 0xff;
    pack5(q, y, b + Q5_1.qs, b + Q5_1.qh);
  }
}

/** C's roundf: halfway cases away from zero. */
function roundAway(v: number): number {
  return Math.sign(v) * Math.round(Math.abs(v));
}

export function quantizeQ8_0(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK, b = i * Q8_0.size;
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(x[o + j]));
    const d = f(amax / 127);
    const id = d ? f(1 / d) : 0;
    setU16(y, b + Q8_0.d, f32ToF16(d));
    for (let j = 0; j < QK; j++) y[b + Q8_0.qs + j] = roundAway(f(x[o + j] * id)) & 0xff;
  }
}
