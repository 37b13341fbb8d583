/**
 * Reference dequantizers for ggml's 256-value k-quant super-blocks, mirroring
 * `dequantize_row_q{2,3,4,5,6}_K` in ggml-quants.c: the per-sub-block scale (and min) is
 * rounded to f32 first, then multiplied by the quant, as the C code does.
 */

import { F16_TABLE } from "../half.ts";
import { Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, QK_K, scaleMinK4, u16At } from "../blocks.ts";

const f = Math.fround;

export function dequantizeQ2_K(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q2_K.size;
    const d = F16_TABLE[u16At(src, b + Q2_K.d)];
    const min = F16_TABLE[u16At(src, b + Q2_K.dmin)];
    let y = i * QK_K;
    let is = 0;
    // Each 128 values use 32 bytes of qs: 2-bit fields at shifts 0, 2, 4, 6, in 16s.
    for (let half = 0; half < 2; half++) {
      const q = b + Q2_K.qs + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let part = 0; part < 2; part++) {
          const sc = src[b + Q2_K.scales + is++];
          const dl = f(d * (sc & 0xf));
          const ml = f(min * (sc >> 4));
          for (let l = 0; l < 16; l++) {
            dst[y++] = f(dl * ((src[q + 16 * part + l] >> shift) & 3)) - ml;
          }
        }
      }
    }
  }
}

/** The 16 signed 6-bit scales of a Q3_K block: low nibbles in bytes 0-7, top bits in 8-11. */
function q3Scale(src: Uint8Array, s: number, j: number): number {
  const low = j < 8 ? src[s + j] & 0xf : src[s + j - 8] >> 4;
  const high = (src[s + 8 + (j % 4)] >> (2 * Math.floor(j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

export function dequantizeQ3_K(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q3_K.size;
    const dAll = F16_TABLE[u16At(src, b + Q3_K.d)];
    const hm = b + Q3_K.hmask;
    let y = i * QK_K;
    let is = 0;
    let m = 1;
    for (let half = 0; half < 2; half++) {
      const q = b + Q3_K.qs + 32 * half;
      for (let shift = 0; shift < 8; shift += 2) {
        for (let part = 0; part < 2; part++) {
          const dl = f(dAll * q3Scale(src, b + Q3_K.scales, is++));
          for (let l = 0; l < 16; l++) {
            const k = 16 * part + l;
            // A clear high bit means the 2-bit value is offset by -4.
            const q3 = ((src[q + k] >> shift) & 3) - (src[hm + k] & m ? 0 : 4);
            dst[y++] = dl * q3;
          }
        }
        m <<= 1;
      }
    }
  }
}

export function dequantizeQ4_K(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q4_K.size;
    const d = F16_TABLE[u16At(src, b + Q4_K.d)];
    const min = F16_TABLE[u16At(src, b + Q4_K.dmin)];
    let y = i * QK_K;
    for (let j = 0; j < 4; j++) {
      const q = b + Q4_K.qs + 32 * j;
      const [sc1, m1] = scaleMinK4(src, b + Q4_K.scales, 2 * j);
      const [sc2, m2] = scaleMinK4(src, b + Q4_K.scales, 2 * j + 1);
      const d1 = f(d * sc1), min1 = f(min * m1);
      const d2 = f(d * sc2), min2 = f(min * m2);
      for (let l = 0; l < 32; l++) dst[y++] = f(d1 * (src[q + l] & 0xf)) - min1;
      for (let l = 0; l < 32; l++) dst[y++] = f(d2 * (src[q + l] >> 4)) - min2;
    }
  }
}

export function dequantizeQ5_K(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q5_K.size;
    const d = F16_TABLE[u16At(src, b + Q5_K.d)];
    const min = F16_TABLE[u16At(src, b + Q5_K.dmin)];
    const qh = b + Q5_K.qh;
    let y = i * QK_K;
    for (let j = 0; j < 4; j++) {
      const ql = b + Q5_K.qs + 32 * j;
      const [sc1, m1] = scaleMinK4(src, b + Q5_K.scales, 2 * j);
      const [sc2, m2] = scaleMinK4(src, b + Q5_K.scales, 2 * j + 1);
      const d1 = f(d * sc1), min1 = f(min * m1);
      const d2 = f(d * sc2), min2 = f(min * m2);
      // The fifth bits of the j-th 64 values are bits 2j and 2j + 1 of qh[l].
      const u1 = 1 << (2 * j), u2 = 2 << (2 * j);
      for (let l = 0; l < 32; l++) {
        dst[y++] = f(d1 * ((src[ql + l] & 0xf) + (src[qh + l] & u1 ? 16 : 0))) - min1;
      }
      for (let l = 0; l < 32; l++) {
        dst[y++] = f(d2 * ((src[ql + l] >> 4) + (src[qh + l] & u2 ? 16 : 0))) - min2;
      }
    }
  }
}

export function dequantizeQ6_K(src: Uint8Array, dst: Float32Array, nBlocks: number): void {
  const ds = new Float32Array(16);
  for (let i = 0; i < nBlocks; i++) {
    const b = i * Q6_K.size;
    const d = F16_TABLE[u16At(src, b + Q6_K.d)];
    for (let s = 0; s < 16; s++) ds[s] = d * int8(src[b + Q6_K.scales + s]);
    for (let half = 0; half < 2; half++) {
      const ql = b + Q6_K.ql + 64 * half;
      const qh = b + Q6_K.qh + 32 * half;
      const y = i * QK_K + 128 * half;
      for (let l = 0; l < 32; l++) {
        // Four 6-bit values share ql[l], ql[l + 32] (nibbles) and qh[l] (2-bit pairs).
        const is = 8 * half + (l >> 4);
        const h = qh + l;
        const q1 = ((src[ql + l] & 0xf) | ((src[h] & 3) << 4)) - 32;
        const q2 = ((src[ql + l + 32] & 0xf) | (((src[h] >> 2) & 3) << 4)) - 32;
        const q3 = ((src[ql + l] >> 4) | (((src[h] >> 4) & 3) << 4)) - 32;
        const q4 = ((src[ql + l + 32] >> 4) | (((src[h] >> 6) & 3) << 4)) - 32;
        dst[y + l] = ds[is] * q1;
        dst[y + l + 32] = ds[is + 2] * q2;
        dst[y + l + 64] = ds[is + 4] * q3;
        dst[y + l + 96] = ds[is + 6] * q4;
      }
    }
  }
}

function int8(v: number): number {
  return (v << 24) >> 24;
}
