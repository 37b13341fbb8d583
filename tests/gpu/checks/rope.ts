/**
 * RoPE against the reference: both ggml layouts (NeoX: Qwen, Gemma; NORM: Llama, Mistral),
 * linear position scaling, per-pair frequency factors (Llama 3.1's rope_freqs), YaRN, at
 * small and large positions (up to 131071); then the model's order (per-head q and k norms, rope q, rope k),
 * which a device may fuse, in every mode.
 */

import type { RopeSpec, RopeYarn, StepLayout, Weight } from "../../../src/backend/backend.ts";
import { GgmlType, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { type Both, type Pair, randomF32, source } from "./pair.ts";

/** RoPE angles are computed in f32 (as llama.cpp does): exact to ~2^-24 of the angle. */
const ROPE_NEAR = 2e-4;
const ROPE_FAR = 1e-2;
const ROPE_FARTHEST = 3e-2;
/** Norm then rope, both in f32. */
const NORM_ROPE = 2e-4;

/** A rope case: the spec without its factors, and whether it has some. */
export interface RopeCase {
  style: RopeSpec["style"];
  base: number;
  freqScale: number;
  factors: boolean;
  yarn: RopeYarn | null;
}

/** Qwen3's YaRN (base 1e6, factor 4 over 32768) for 128-wide heads, as llama.cpp sets it. */
const QWEN3_YARN: RopeYarn = { extFactor: 1, low: 23, high: 40, mscale: Math.fround(1.1386294) };

export const ROPE_CASES: readonly RopeCase[] = [
  { style: "neox", base: 1e6, freqScale: 1, factors: false, yarn: null },
  { style: "norm", base: 1e4, freqScale: 1, factors: false, yarn: null },
  { style: "norm", base: 5e5, freqScale: 1, factors: true, yarn: null },
  { style: "neox", base: 1e6, freqScale: 0.125, factors: false, yarn: null },
  { style: "neox", base: 1e4, freqScale: 0.25, factors: true, yarn: null },
  { style: "neox", base: 1e6, freqScale: 0.25, factors: false, yarn: QWEN3_YARN },
  {
    style: "norm",
    base: 5e5,
    freqScale: 0.125,
    factors: true,
    yarn: { extFactor: 0.5, low: 3, high: 9, mscale: 1.2 },
  },
];

/** Frequency factors for heads of `dim` as an F32 row: 1 for the fast pairs, up to 8. */
function factorWeight(pair: Pair, dim: number): Both<Weight> {
  const half = dim / 2;
  const values = Float32Array.from({ length: half }, (_, i) => 1 + (7 * i) / (half - 1));
  const bytes = new Uint8Array(values.buffer);
  return pair.weight(source("rope_freqs", ggmlTypeInfo(GgmlType.F32)!, 1, half, bytes));
}

/** The case's spec on each backend, for heads of `dim`. */
export function ropeSpecs(pair: Pair, c: RopeCase, dim: number): Both<RopeSpec> {
  const f = c.factors ? factorWeight(pair, dim) : null;
  const spec = { style: c.style, base: c.base, freqScale: c.freqScale, yarn: c.yarn };
  return {
    dev: { ...spec, freqFactors: f?.dev ?? null },
    ref: { ...spec, freqFactors: f?.ref ?? null },
  };
}

function describe(c: RopeCase): string {
  const yarn = c.yarn ? ` yarn ${JSON.stringify(c.yarn)}` : "";
  return `${c.style} base ${c.base} scale ${c.freqScale}${c.factors ? " with factors" : ""}${yarn}`;
}

export function checkRope(pair: Pair): void {
  // Positions sampled up to 128k (YaRN's reach for Qwen3): an f32 angle there is exact to
  // ~2^-24 of 131071, and the device computes it another way than the reference.
  const far = Array.from({ length: 6 }, () => pair.rng.int(131072));
  const sets: Array<[number[], number]> = [
    [[0, 7, 1234, 2047, 3], ROPE_NEAR],
    [[40000, 40961, 9], ROPE_FAR],
    [[131071, 98304, 65537, ...far], ROPE_FARTHEST],
  ];
  for (const c of ROPE_CASES) {
    for (const [heads, dim] of [[3, 64], [2, 128], [5, 32]]) {
      const spec = ropeSpecs(pair, c, dim);
      for (const [list, bound] of sets) {
        const positions = Int32Array.from(list);
        const layout: StepLayout = { positions, sequences: [] };
        const x = pair.random(positions.length, heads * dim);
        pair.dev.rope(x.dev, layout, heads, dim, spec.dev);
        pair.ref.rope(x.ref, layout, heads, dim, spec.ref);
        pair.check(`rope ${describe(c)}, ${heads} heads of ${dim}, positions ${list}`, x, bound);
      }
    }
  }
}

/**
 * Per-head norms of q and k, then rope q and rope k (what a device fuses), every case;
 * returns the device's q and k of each.
 */
export function checkNormRope(pair: Pair): Float32Array[] {
  const outs: Float32Array[] = [];
  const [rows, heads, kvHeads, dim] = [4, 4, 2, 64];
  const layout: StepLayout = { positions: Int32Array.from([3, 17, 700, 2000]), sequences: [] };
  for (const c of ROPE_CASES) {
    const spec = ropeSpecs(pair, c, dim);
    const norm = (): Both<Weight> => {
      const g = Float32Array.from(randomF32(pair.rng, dim, 0.3), (v) => 1 + v);
      const f32 = ggmlTypeInfo(GgmlType.F32)!;
      return pair.weight(source("head_norm", f32, 1, dim, new Uint8Array(g.buffer)));
    };
    const [qn, kn] = [norm(), norm()];
    const q = pair.random(rows, heads * dim, 2);
    const k = pair.random(rows, kvHeads * dim, 2);
    for (const side of ["dev", "ref"] as const) {
      const be = pair[side];
      be.rmsNorm(q[side], q[side], qn[side], dim, 1e-6);
      be.rmsNorm(k[side], k[side], kn[side], dim, 1e-6);
      be.rope(q[side], layout, heads, dim, spec[side]);
      be.rope(k[side], layout, kvHeads, dim, spec[side]);
    }
    pair.check(`q norm + rope ${describe(c)}`, q, NORM_ROPE);
    pair.check(`k norm + rope ${describe(c)}`, k, NORM_ROPE);
    outs.push(pair.dev.read(q.dev), pair.dev.read(k.dev));
  }
  return outs;
}
