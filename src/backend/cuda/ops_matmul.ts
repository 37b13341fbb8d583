/**
 * Recording matrix products. A few tokens (decode): one mat-vec launch per 8 tokens, on
 * activations quantized to q8_1 once and shared by every product that reads the same
 * activation (q, k and v; gate and up). Many tokens with cuBLAS loaded (prefill): the
 * activation in f16 (rows past f16's range scaled by a power of two, undone on the
 * output), the weight as its kept f16 copy (expansions.ts) or expanded a tile at a time,
 * cublasGemmEx.
 */

import { GgmlType } from "../../gguf/types.ts";
import type { CudaContext } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import {
  GEMM_MIN_TOKENS,
  GEMM_TILE_BYTES,
  MATVEC_MAX_TOKENS,
  type MatvecPlan,
  matvecPlan,
  paddedCols,
  threadsPerRow,
  tokensInstance,
} from "./matmul_plan.ts";
import type { Kernel } from "./kernels.ts";
import type { CudaActivation, CudaWeight } from "./resources.ts";
import { fuseQuantize, recordMatvec, same } from "./fusion.ts";

const MV_THREADS = 128;

/** `x` quantized to q8_1 (cached until something writes x or the step ends). */
export function quantized(
  ctx: CudaContext,
  x: CudaActivation,
): { xq: number; xd: number; kp: number } {
  const kp = paddedCols(x.cols);
  const xq = ctx.scratch("xq", x.rows * kp);
  const xd = ctx.scratch("xd", x.rows * (kp / 32) * 8);
  const cached = ctx.quantized;
  if (cached !== null && same(cached.src, x) && cached.kp === kp) return cached;
  if (!(ctx.fusion && fuseQuantize(ctx, x, { xq, xd, kp }))) {
    ctx.runner.tape.launch(ctx.k("quantize_q8_1"), kp / 128, x.rows, 1, 128)
      .p(xq).p(xd).p(x.ptr).i(x.rows).i(x.cols).i(kp).end();
  }
  ctx.quantized = { src: { ptr: x.ptr, rows: x.rows, cols: x.cols }, xq, xd, kp };
  return ctx.quantized;
}

/**
 * `x` as f16, each row scaled by a power of two where it would overflow f16, and where the
 * scales are (cached like the quantized form).
 */
function halves(ctx: CudaContext, x: CudaActivation): { ptr: number; scale: number } {
  const ptr = ctx.scratch("xh", x.rows * x.cols * 2);
  const scale = ctx.scratch("xh_scale", x.rows * 4);
  const cached = ctx.halves;
  if (cached !== null && same(cached.src, x)) return cached;
  ctx.runner.tape.launch(ctx.k("f32_to_f16_rows"), x.rows, 1, 1, 256)
    .p(ptr).p(scale).p(x.ptr).i(x.rows).i(x.cols).end();
  ctx.halves = { src: { ptr: x.ptr, rows: x.rows, cols: x.cols }, ptr, scale };
  return ctx.halves;
}

/** The weight as f16: itself, its kept copy (made now if the budget allows), or null. */
function expanded(ctx: CudaContext, w: CudaWeight): number | null {
  if (w.type.id === GgmlType.F16) return w.ptr;
  const kept = ctx.expansions.get(w.ptr);
  if (kept !== null) return kept;
  const copy = ctx.expansions.reserve(w.ptr, w.rows * w.cols * 2);
  if (copy === null) return null;
  ctx.runner.tape.launch(ctx.k("dequant_f16"), w.rows, 1, 1, 256)
    .p(copy).p(w.ptr).i(w.type.id).i(w.rows).i(w.cols).i(w.rowBytes).end();
  return copy;
}

function gemm(ctx: CudaContext, out: CudaActivation, w: CudaWeight, x: CudaActivation): void {
  const cublas = ctx.cublas!;
  const { rows, cols } = w;
  const n = x.rows;
  const tape = ctx.runner.tape;
  const xh = halves(ctx, x);
  const whole = expanded(ctx, w);
  if (whole !== null) {
    const yp = out.ptr;
    tape.hostCall(() => cublas.gemmF16(rows, n, cols, whole, cols, xh.ptr, cols, yp, rows));
  } else {
    const tile = Math.min(rows, Math.max(1, Math.floor(GEMM_TILE_BYTES / (cols * 2))));
    const wh = ctx.scratch("wh", tile * cols * 2);
    for (let r0 = 0; r0 < rows; r0 += tile) {
      const tr = Math.min(tile, rows - r0);
      tape.launch(ctx.k("dequant_f16"), tr, 1, 1, 256)
        .p(wh).p(w.ptr + r0 * w.rowBytes).i(w.type.id).i(tr).i(cols).i(w.rowBytes).end();
      const yp = out.ptr + 4 * r0;
      tape.hostCall(() => cublas.gemmF16(tr, n, cols, wh, cols, xh.ptr, cols, yp, rows));
    }
  }
  tape.launch(ctx.k("unscale_rows"), n, 1, 1, 256)
    .p(out.ptr).p(xh.scale).i(n).i(rows).end();
}

/** A weight's mat-vec launch shape and kernels, per token-count instance. */
interface Matvec {
  plan: MatvecPlan;
  tpr: number;
  grid: number;
  /** By token count 1..MATVEC_MAX_TOKENS: the kernel instance and its number. */
  kernels: Kernel[];
  instances: number[];
}

function matvecOf(ctx: CudaContext, w: CudaWeight): Matvec {
  if (w.matvec !== null) return w.matvec as Matvec;
  const plan = matvecPlan(w.type, w.cols);
  const tpr = plan.kind === "any" ? 32 : threadsPerRow(w.cols / plan.unitValues);
  const kernels: Kernel[] = [];
  const instances: number[] = [];
  for (let n = 1; n <= MATVEC_MAX_TOKENS; n++) {
    const inst = tokensInstance(n);
    instances[n] = inst;
    if (plan.kind === "q8") kernels[n] = ctx.k(`mmvq_${plan.name}_${inst}`);
    if (plan.kind === "float") kernels[n] = ctx.k(`mmv_${plan.name}_${inst}`);
  }
  const m: Matvec = { plan, tpr, grid: Math.ceil(w.rows / (MV_THREADS / tpr)), kernels, instances };
  w.matvec = m;
  return m;
}

/** out = x · Wᵀ for every row of x. */
export function recordMatmul(
  ctx: CudaContext,
  out: CudaActivation,
  w: CudaWeight,
  x: CudaActivation,
): void {
  if (x.cols !== w.cols) {
    throw invalidArgument("matmul", `x has ${x.cols} columns, ${w.name} takes ${w.cols}`);
  }
  if (out.cols !== w.rows || out.rows < x.rows) {
    throw invalidArgument(
      "matmul",
      `out is ${out.rows}x${out.cols}, ${w.name} needs ${x.rows}x${w.rows}`,
    );
  }
  const n = x.rows;
  const { rows, cols, rowBytes } = w;
  if (ctx.cublas !== null && n >= GEMM_MIN_TOKENS) return gemm(ctx, out, w, x);
  const { plan, tpr, grid, kernels, instances } = matvecOf(ctx, w);
  const tape = ctx.runner.tape;
  if (plan.kind === "any") {
    tape.launch(ctx.k("mmv_any"), Math.ceil(rows / 4), 1, 1, MV_THREADS)
      .p(out.ptr).p(w.ptr).i(w.type.id).p(x.ptr).i(rows).i(cols).i(rowBytes).i(n).end();
    return;
  }
  if (plan.kind === "q8") {
    const q = quantized(ctx, x);
    if (n <= MATVEC_MAX_TOKENS) {
      const matvec = { name: plan.name, instance: instances[n], n, tpr };
      recordMatvec(ctx, out, w, q, matvec, kernels[n]);
      return;
    }
    for (let t0 = 0; t0 < n; t0 += MATVEC_MAX_TOKENS) {
      const nt = Math.min(MATVEC_MAX_TOKENS, n - t0);
      tape.launch(kernels[nt], grid, 1, 1, MV_THREADS)
        .p(out.ptr + 4 * t0 * rows).p(w.ptr).p(q.xq + t0 * q.kp).p(q.xd + t0 * (q.kp / 32) * 8)
        .i(rows).i(cols).i(rowBytes).i(q.kp).i(nt).i(tpr).end();
    }
    return;
  }
  for (let t0 = 0; t0 < n; t0 += MATVEC_MAX_TOKENS) {
    const nt = Math.min(MATVEC_MAX_TOKENS, n - t0);
    tape.launch(kernels[nt], grid, 1, 1, MV_THREADS)
      .p(out.ptr + 4 * t0 * rows).p(w.ptr).p(x.ptr + 4 * t0 * cols)
      .i(rows).i(cols).i(rowBytes).i(nt).i(tpr).end();
  }
}
