/**
 * Recording RoPE: the spec checked and turned into what the kernels take, then fused into
 * the per-head norm just recorded (fusion.ts) or launched on its own (`rope`,
 * kernels/cuda/elementwise.cu; both turn pairs through kernels/cuda/rope.cuh).
 */

import type { RopeSpec, StepLayout } from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import { fuseRope } from "./fusion.ts";
import { internPositions } from "./ops_attention.ts";
import { asWeight, type CudaActivation } from "./resources.ts";

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

const ROPE_THREADS = 128;

/** `spec` for heads of `headDim`, checked: a bad spec would turn every row wrongly. */
function deviceRope(spec: RopeSpec, headDim: number): DeviceRope {
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

export function recordRope(
  ctx: CudaContext,
  x: CudaActivation,
  layout: StepLayout,
  nHeads: number,
  headDim: number,
  spec: RopeSpec,
): void {
  if (
    !(Number.isInteger(nHeads) && nHeads >= 1 && Number.isInteger(headDim) && headDim >= 2) ||
    x.cols !== nHeads * headDim || headDim % 2 !== 0
  ) {
    throw invalidArgument("rope", `${x.cols} columns as ${nHeads} heads of ${headDim}`);
  }
  const r = deviceRope(spec, headDim);
  const positions = internPositions(ctx, layout, x.rows);
  if (ctx.fusion && fuseRope(ctx, x, positions, nHeads, headDim, r)) return;
  const grid = Math.ceil((nHeads * headDim) / 2 / ROPE_THREADS);
  ctx.runner.tape.launch(ctx.k("rope"), grid, x.rows, 1, ROPE_THREADS)
    .p(x.ptr).p(positions).opt(r.factors).i(x.rows).i(nHeads).i(headDim)
    .f(r.base).f(r.freqScale).f(r.extFactor).f(r.corrLow).f(r.corrHigh).f(r.mscale).i(r.norm)
    .end();
}
