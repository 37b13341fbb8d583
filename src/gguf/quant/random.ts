/**
 * Random but valid blocks of every type with a reference dequantizer: all quant bits are
 * uniformly random (so kernels see every bit pattern), and the f16 scales are chosen so
 * the dequantized values have roughly the requested RMS and zero mean. Synthetic models
 * are written from these directly, without quantizing anything.
 */

import { GgufError } from "../errors.ts";
import { f32ToBf16, f32ToF16 } from "../half.ts";
import { Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, setU16 } from "../blocks.ts";
import type { Rng } from "../rng.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo } from "../types.ts";

/**
 * How each block's scales are set: `d` at `dOffset` with RMS(values) = |d| * `unitRms` for
 * uniform random quants; `minOffset`, when present, gets the f16 of d * `minPerD` (an
 * affine offset that centres the values); `signed` lets d take either sign.
 */
interface ScalePlan {
  dOffset: number;
  unitRms: number;
  signed: boolean;
  minOffset?: number;
  minPerD?: number;
}

// unitRms is sqrt(E[v^2]) for d = 1 with every quant field uniform: e.g. Q4_0's levels
// are -8..7 (E = 21.5); Q4_K's value is sc*q - 7.5*m with sc, m in 0..63 and q in 0..15.
const PLANS = new Map<number, ScalePlan>([
  [GgmlType.Q4_0, { dOffset: Q4_0.d, unitRms: Math.sqrt(21.5), signed: true }],
  [GgmlType.Q4_1, {
    dOffset: Q4_1.d,
    unitRms: Math.sqrt(21.25),
    signed: false,
    minOffset: Q4_1.m,
    minPerD: -7.5,
  }],
  [GgmlType.Q5_0, { dOffset: Q5_0.d, unitRms: Math.sqrt(85.5), signed: true }],
  [GgmlType.Q5_1, {
    dOffset: Q5_1.d,
    unitRms: Math.sqrt(85.25),
    signed: false,
    minOffset: Q5_1.m,
    minPerD: -15.5,
  }],
  [GgmlType.Q8_0, { dOffset: Q8_0.d, unitRms: Math.sqrt(5461.5), signed: true }],
  [GgmlType.Q2_K, {
    dOffset: Q2_K.d,
    unitRms: Math.sqrt(192.5),
    signed: false,
    minOffset: Q2_K.dmin,
    minPerD: 1.5,
  }],
  [GgmlType.Q3_K, { dOffset: Q3_K.d, unitRms: Math.sqrt(341.5 * 5.5), signed: true }],
  [GgmlType.Q4_K, {
    dOffset: Q4_K.d,
    unitRms: Math.sqrt(66727.5),
    signed: false,
    minOffset: Q4_K.dmin,
    minPerD: 7.5,
  }],
  [GgmlType.Q5_K, {
    dOffset: Q5_K.d,
    unitRms: Math.sqrt(277649.5),
    signed: false,
    minOffset: Q5_K.dmin,
    minPerD: 15.5,
  }],
  [GgmlType.Q6_K, { dOffset: Q6_K.d, unitRms: Math.sqrt(5461.5 * 341.5), signed: true }],
]);

/** Uniform in [-a, a] has RMS a / sqrt(3). */
const UNIFORM_SPAN = Math.sqrt(3);

/** 65536 evenly spaced values in [-a, a) as 16-bit floats, indexed by 16 random bits. */
function halfTable(a: number, convert: (x: number) => number): Uint16Array {
  const table = new Uint16Array(65536);
  for (let i = 0; i < 65536; i++) table[i] = convert(((i + 0.5) / 32768 - 1) * a);
  return table;
}

function fillHalf(out: Uint8Array, rng: Rng, table: Uint16Array): void {
  for (let i = 0; i + 4 <= out.byteLength; i += 4) {
    const r = rng.u32();
    setU16(out, i, table[r & 0xffff]);
    setU16(out, i + 2, table[r >>> 16]);
  }
  if (out.byteLength % 4 === 2) setU16(out, out.byteLength - 2, table[rng.u32() & 0xffff]);
}

function fillF32(out: Uint8Array, rng: Rng, a: number): void {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let i = 0; i < out.byteLength; i += 4) dv.setFloat32(i, (2 * rng.float() - 1) * a, true);
}

function info(type: GgmlTypeInfo | number): GgmlTypeInfo {
  const t = typeof type === "number" ? ggmlTypeInfo(type) : type;
  if (t === undefined) throw new GgufError("gguf_unknown_tensor_type", `unknown ggml type ${type}`);
  return t;
}

/** Whether `type` has a random block generator (every dequantizable type does). */
export function canRandomize(type: GgmlTypeInfo | number): boolean {
  const id = info(type).id;
  return PLANS.has(id) || id === GgmlType.F32 || id === GgmlType.F16 || id === GgmlType.BF16;
}

/**
 * Fills `out` (a whole number of blocks of `type`) with random valid blocks whose
 * dequantized values have RMS about `rms`.
 */
export function fillRandomBlocks(
  type: GgmlTypeInfo | number,
  out: Uint8Array,
  rng: Rng,
  rms = 1,
): void {
  const t = info(type);
  if (out.byteLength % t.typeSize !== 0) {
    throw new GgufError(
      "gguf_bad_tensor",
      `${out.byteLength} bytes are not a whole number of ${t.name} blocks (${t.typeSize} bytes)`,
    );
  }
  if (t.id === GgmlType.F32) return fillF32(out, rng, rms * UNIFORM_SPAN);
  if (t.id === GgmlType.F16) return fillHalf(out, rng, halfTable(rms * UNIFORM_SPAN, f32ToF16));
  if (t.id === GgmlType.BF16) return fillHalf(out, rng, halfTable(rms * UNIFORM_SPAN, f32ToBf16));
  const plan = PLANS.get(t.id);
  if (plan === undefined) {
    throw new GgufError("gguf_unsupported", `no random block generator for ${t.name}`);
  }
  rng.fill(out);
  const base = rms / plan.unitRms;
  for (let b = 0; b < out.byteLength; b += t.typeSize) {
    // Scales vary by +-25% between blocks, like real data.
    const r = rng.u32();
    const d = base * (0.75 + 0.5 * ((r & 0xffff) / 65536)) * (plan.signed && r >>> 31 ? -1 : 1);
    setU16(out, b + plan.dOffset, f32ToF16(d));
    if (plan.minOffset !== undefined) setU16(out, b + plan.minOffset, f32ToF16(d * plan.minPerD!));
  }
}

/** `nBlocks` random valid blocks of `type` (see fillRandomBlocks). */
export function randomBlocks(
  type: GgmlTypeInfo | number,
  nBlocks: number,
  rng: Rng,
  rms = 1,
): Uint8Array {
  const out = new Uint8Array(nBlocks * info(type).typeSize);
  fillRandomBlocks(type, out, rng, rms);
  return out;
}
