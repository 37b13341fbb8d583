/**
 * A RoPE spec checked and turned into what the kernels take (kernels/cuda/rope.cuh), shared
 * by the rope launch (ops_rope.ts) and its fusion into the per-head norm (fusion.ts).
 */

import type { RopeSpec } from "../backend.ts";
import { invalidArgument } from "./errors.ts";
import { asWeight } from "./resources.ts";

/**
 * A rope as the kernels take it: factors as a device address (0: none), norm 1 for NORM,
 * YaRN's terms (extFactor 0 and mscale 1 without it).
 */
export interface DeviceRope {
  base: number;
  freqScale: number;
  extFactor: number;
  corrLow: number;
  corrHigh: number;
  mscale: number;
  factors: number;
  norm: 0 | 1;
}

/** `spec` for heads of `headDim`, checked: a bad spec would turn every row wrongly. */
export function deviceRope(spec: RopeSpec, headDim: number): DeviceRope {
  if (spec.style !== "neox" && spec.style !== "norm") {
    throw invalidArgument("rope", `style ${spec.style}`);
  }
  if (!(spec.base > 0 && Number.isFinite(spec.base))) {
    throw invalidArgument("rope", `base ${spec.base}`);
  }
  if (!(spec.freqScale > 0 && Number.isFinite(spec.freqScale))) {
    throw invalidArgument("rope", `freqScale ${spec.freqScale}`);
  }
  const y = spec.yarn ?? { extFactor: 0, low: 0, high: 0, mscale: 1 };
  if (![y.extFactor, y.low, y.high].every(Number.isFinite)) {
    throw invalidArgument("rope", `yarn ext ${y.extFactor} over pairs ${y.low}..${y.high}`);
  }
  if (!(y.mscale > 0 && Number.isFinite(y.mscale))) {
    throw invalidArgument("rope", `yarn mscale ${y.mscale}`);
  }
  let factors = 0;
  if (spec.freqFactors !== null) {
    const f = asWeight(spec.freqFactors, "rope");
    if (f.rows !== 1 || f.cols !== headDim / 2) {
      throw invalidArgument(
        "rope",
        `freqFactors ${f.name} is ${f.rows}x${f.cols}, not one row of ${headDim / 2}`,
      );
    }
    if (!f.positive) {
      throw invalidArgument("rope", `freqFactors ${f.name} holds a value that is not above 0`);
    }
    factors = f.ptr;
  }
  return {
    base: spec.base,
    freqScale: spec.freqScale,
    extFactor: y.extFactor,
    corrLow: y.low,
    corrHigh: y.high,
    mscale: y.mscale,
    factors,
    norm: spec.style === "norm" ? 1 : 0,
  };
}
