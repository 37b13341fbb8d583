/**
 * Reference quantizers for ggml's k-quants, following `quantize_row_q{2,3,4,5,6}_K_ref`
 * in ggml-quants.c (llama-quantize without an importance matrix): per sub-block scale
 * search, then the block scales are themselves quantized (to 4, 6 or 8 bits), and the
 * values re-quantized against the scales as they will be decoded.
 */

import { f16ToF32, f32ToF16 } from "../half.ts";
import { Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, QK_K, scaleMinK4, setU16 } from "../blocks.ts";
import { makeQ3Quants, makeQkx2Quants, makeQxQuants, nearestInt } from "./k_search.ts";

const f = Math.fround;

function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

/** Packs 256 2-bit levels: byte l of each 32-byte group holds values l, l+32, l+64, l+96. */
function pack2(L: Int32Array, y: Uint8Array, qs: number): void {
  for (let j = 0; j < QK_K; j += 128) {
    for (let l = 0; l < 32; l++) {
      y[qs + j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
        (L[j + l + 96] << 6);
    }
  }
}

export function quantizeQ2_K(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const L = new Int32Array(QK_K);
  const weights = new Float32Array(16);
  const scales = new Float32Array(16);
  const mins = new Float32Array(16);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK_K, b = i * Q2_K.size;
    let maxScale = 0;
    let maxMin = 0;
    for (let j = 0; j < 16; j++) {
      for (let l = 0; l < 16; l++) weights[l] = Math.abs(x[o + 16 * j + l]);
      [scales[j], mins[j]] = makeQkx2Quants(
        16,
        3,
        x,
        o + 16 * j,
        weights,
        L,
        16 * j,
        -0.5,
        0.1,
        15,
        true,
      );
      maxScale = Math.max(maxScale, scales[j]);
      maxMin = Math.max(maxMin, mins[j]);
    }
    y.fill(0, b, b + Q2_K.size);
    if (maxScale > 0) {
      const iscale = f(15 / maxScale);
      for (let j = 0; j < 16; j++) y[b + Q2_K.scales + j] = nearestInt(iscale * scales[j]);
      setU16(y, b + Q2_K.d, f32ToF16(f(maxScale / 15)));
    }
    if (maxMin > 0) {
      const iscale = f(15 / maxMin);
      for (let j = 0; j < 16; j++) y[b + Q2_K.scales + j] |= nearestInt(iscale * mins[j]) << 4;
      setU16(y, b + Q2_K.dmin, f32ToF16(f(maxMin / 15)));
    }
    const dAll = f16ToF32(y[b + Q2_K.d] | (y[b + Q2_K.d + 1] << 8));
    const mAll = f16ToF32(y[b + Q2_K.dmin] | (y[b + Q2_K.dmin + 1] << 8));
    for (let j = 0; j < 16; j++) {
      const sc = y[b + Q2_K.scales + j];
      const d = f(dAll * (sc & 0xf));
      if (!d) continue;
      const dm = f(mAll * (sc >> 4));
      for (let l = 0; l < 16; l++) {
        L[16 * j + l] = clamp(nearestInt(f(x[o + 16 * j + l] + dm) / d), 0, 3);
      }
    }
    pack2(L, y, b + Q2_K.qs);
  }
}

export function quantizeQ3_K(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const L = new Int32Array(QK_K);
  const scales = new Float32Array(16);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK_K, b = i * Q3_K.size;
    let maxScale = 0;
    let amax = 0;
    for (let j = 0; j < 16; j++) {
      scales[j] = makeQ3Quants(16, 4, x, o + 16 * j, L, 16 * j);
      if (Math.abs(scales[j]) > amax) {
        amax = Math.abs(scales[j]);
        maxScale = scales[j];
      }
    }
    y.fill(0, b, b + Q3_K.size);
    const s = b + Q3_K.scales;
    if (maxScale) {
      // 6-bit signed scales: low nibbles in bytes 0-7, top 2 bits in bytes 8-11.
      const iscale = f(-32 / maxScale);
      for (let j = 0; j < 16; j++) {
        const l = clamp(nearestInt(iscale * scales[j]), -32, 31) + 32;
        if (j < 8) y[s + j] = l & 0xf;
        else y[s + j - 8] |= (l & 0xf) << 4;
        y[s + 8 + (j % 4)] |= (l >> 4) << (2 * Math.floor(j / 4));
      }
      setU16(y, b + Q3_K.d, f32ToF16(f(1 / iscale)));
    }
    const dAll = f16ToF32(y[b + Q3_K.d] | (y[b + Q3_K.d + 1] << 8));
    for (let j = 0; j < 16; j++) {
      const low = j < 8 ? y[s + j] & 0xf : y[s + j - 8] >> 4;
      const sc = (low | (((y[s + 8 + (j % 4)] >> (2 * Math.floor(j / 4))) & 3) << 4)) - 32;
      const d = f(dAll * sc);
      if (!d) continue;
      for (let l = 0; l < 16; l++) {
        L[16 * j + l] = clamp(nearestInt(x[o + 16 * j + l] / d), -4, 3) + 4;
      }
    }
    // The high bit of value j goes to bit (j / 32) of hmask[j % 32]; the rest is 2-bit packed.
    for (let j = 0; j < QK_K; j++) {
      if (L[j] > 3) {
        y[b + Q3_K.hmask + (j % 32)] |= 1 << Math.floor(j / 32);
        L[j] -= 4;
      }
    }
    pack2(L, y, b + Q3_K.qs);
  }
}

/** Writes 8 six-bit scales and mins in the Q4_K/Q5_K packing (inverse of scaleMinK4). */
function packScaleMinK4(ls: Int32Array, lm: Int32Array, y: Uint8Array, s: number): void {
  for (let j = 0; j < 8; j++) {
    if (j < 4) {
      y[s + j] = ls[j];
      y[s + j + 4] = lm[j];
    } else {
      y[s + j + 4] = (ls[j] & 0xf) | ((lm[j] & 0xf) << 4);
      y[s + j - 4] |= (ls[j] >> 4) << 6;
      y[s + j] |= (lm[j] >> 4) << 6;
    }
  }
}

/** Q4_K and Q5_K share everything but the level count (15 or 31) and the search range. */
function quantizeK4K5(
  x: Float32Array,
  o: number,
  y: Uint8Array,
  b: number,
  layout: typeof Q4_K | typeof Q5_K,
  nmax: number,
  L: Int32Array,
): void {
  const weights = new Float32Array(32);
  const scales = new Float32Array(8);
  const mins = new Float32Array(8);
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 += x[o + 32 * j + l] * x[o + 32 * j + l];
    const avX = Math.sqrt(sumX2 / 32);
    for (let l = 0; l < 32; l++) weights[l] = avX + Math.abs(x[o + 32 * j + l]);
    [scales[j], mins[j]] = nmax === 15
      ? makeQkx2Quants(32, 15, x, o + 32 * j, weights, L, 32 * j, -1, 0.1, 20, false)
      : makeQkx2Quants(32, 31, x, o + 32 * j, weights, L, 32 * j, -0.5, 0.1, 15, false);
    maxScale = Math.max(maxScale, scales[j]);
    maxMin = Math.max(maxMin, mins[j]);
  }
  const invScale = maxScale > 0 ? f(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? f(63 / maxMin) : 0;
  const ls = new Int32Array(8);
  const lm = new Int32Array(8);
  for (let j = 0; j < 8; j++) {
    ls[j] = Math.min(63, nearestInt(invScale * scales[j]));
    lm[j] = Math.min(63, nearestInt(invMin * mins[j]));
  }
  y.fill(0, b, b + layout.size);
  packScaleMinK4(ls, lm, y, b + layout.scales);
  setU16(y, b + layout.d, f32ToF16(f(maxScale / 63)));
  setU16(y, b + layout.dmin, f32ToF16(f(maxMin / 63)));
  const dAll = f16ToF32(y[b + layout.d] | (y[b + layout.d + 1] << 8));
  const mAll = f16ToF32(y[b + layout.dmin] | (y[b + layout.dmin + 1] << 8));
  for (let j = 0; j < 8; j++) {
    const [sc, m] = scaleMinK4(y, b + layout.scales, j);
    const d = f(dAll * sc);
    if (!d) continue;
    const dm = f(mAll * m);
    for (let l = 0; l < 32; l++) {
      L[32 * j + l] = clamp(nearestInt(f(x[o + 32 * j + l] + dm) / d), 0, nmax);
    }
  }
}

export function quantizeQ4_K(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const L = new Int32Array(QK_K);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK_K, b = i * Q4_K.size;
    quantizeK4K5(x, o, y, b, Q4_K, 15, L);
    // Each 64 values: the first 32 in low nibbles, the next 32 in high nibbles.
    for (let j = 0; j < QK_K; j += 64) {
      for (let l = 0; l < 32; l++) y[b + Q4_K.qs + j / 2 + l] = L[j + l] | (L[j + l + 32] << 4);
    }
  }
}

export function quantizeQ5_K(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const L = new Int32Array(QK_K);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK_K, b = i * Q5_K.size;
    quantizeK4K5(x, o, y, b, Q5_K, 31, L);
    // As Q4_K, plus the fifth bits of the n-th 64 values in bits 2n and 2n + 1 of qh.
    for (let n = 0, m1 = 1, m2 = 2; n < QK_K; n += 64, m1 <<= 2, m2 <<= 2) {
      for (let j = 0; j < 32; j++) {
        let l1 = L[n + j];
        let l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[b + Q5_K.qh + j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          y[b + Q5_K.qh + j] |= m2;
        }
        y[b + Q5_K.qs + n / 2 + j] = l1 | (l2 << 4);
      }
    }
  }
}

export function quantizeQ6_K(x: Float32Array, y: Uint8Array, nBlocks: number): void {
  const L = new Int32Array(QK_K);
  const scales = new Float32Array(16);
  for (let i = 0; i < nBlocks; i++) {
    const o = i * QK_K, b = i * Q6_K.size;
    let maxScale = 0;
    let maxAbsScale = 0;
    for (let ib = 0; ib < 16; ib++) {
      scales[ib] = makeQxQuants(16, 32, x, o + 16 * ib, L, 16 * ib);
      if (Math.abs(scales[ib]) > maxAbsScale) {
        maxAbsScale = Math.abs(scales[ib]);
        maxScale = scales[ib];
      }
    }
    y.fill(0, b, b + Q6_K.size);
    if (maxAbsScale < 1e-15) continue;
    const iscale = f(-128 / maxScale);
    setU16(y, b + Q6_K.d, f32ToF16(f(1 / iscale)));
    for (let ib = 0; ib < 16; ib++) {
      y[b + Q6_K.scales + ib] = Math.min(127, nearestInt(iscale * scales[ib])) & 0xff;
    }
    const dAll = f16ToF32(y[b + Q6_K.d] | (y[b + Q6_K.d + 1] << 8));
    for (let j = 0; j < 16; j++) {
      const d = f(dAll * ((y[b + Q6_K.scales + j] << 24) >> 24));
      if (!d) continue;
      for (let l = 0; l < 16; l++) {
        L[16 * j + l] = clamp(nearestInt(x[o + 16 * j + l] / d), -32, 31) + 32;
      }
    }
    // Per 128 values: low nibbles of l and l+64 share ql[l], of l+32 and l+96 share
    // ql[l+32]; the four 2-bit high parts share qh[l].
    for (let j = 0; j < QK_K; j += 128) {
      const ql = b + Q6_K.ql + j / 2;
      const qh = b + Q6_K.qh + j / 4;
      for (let l = 0; l < 32; l++) {
        const [q1, q2, q3, q4] = [L[j + l], L[j + l + 32], L[j + l + 64], L[j + l + 96]];
        y[ql + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
        y[ql + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
        y[qh + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
      }
    }
  }
}
