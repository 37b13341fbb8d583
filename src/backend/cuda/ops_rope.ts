/**
 * Recording RoPE: the spec checked and turned into what the kernels take (device_rope.ts),
 * then fused into the per-head norm just recorded (fusion.ts) or launched on its own
 * (`rope`, kernels/cuda/elementwise.cu; both turn pairs through kernels/cuda/rope.cuh).
 */

import type { RopeSpec, StepLayout } from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { deviceRope } from "./device_rope.ts";
import { invalidArgument } from "./errors.ts";
import { fuseRope } from "./fusion.ts";
import { internPositions } from "./ops_attention.ts";
import type { CudaActivation } from "./resources.ts";

const ROPE_THREADS = 128;

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
