/**
 * RoPE's angle and magnitude for one pair, in f64: the plain form of ggml's `rope_yarn`,
 * which the reference backend rotates by and the kernels are checked against.
 */

import type { RopeSpec } from "../backend.ts";

/** Pair i's turn at `pos`: its angle, and the magnitude cos and sin are scaled by. */
export function ropeTurn(
  spec: RopeSpec,
  pos: number,
  i: number,
  headDim: number,
  factor: number,
): { angle: number; mscale: number } {
  const extrap = (pos * Math.pow(spec.base, (-2 * i) / headDim)) / factor;
  const interp = spec.freqScale * extrap;
  const y = spec.yarn;
  if (y === null) return { angle: interp, mscale: 1 };
  if (y.extFactor === 0) return { angle: interp, mscale: y.mscale };
  const ramp = 1 - Math.min(1, Math.max(0, (i - y.low) / Math.max(0.001, y.high - y.low)));
  const mix = ramp * y.extFactor;
  return { angle: interp * (1 - mix) + extrap * mix, mscale: y.mscale };
}
