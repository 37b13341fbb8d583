/**
 * Fusing the ops a transformer layer issues back to back, so a decode step launches fewer
 * kernels (a Qwen3 layer: 23 launches unfused, 14 fused). Ops note what they recorded;
 * when a later op can take over an earlier record, that record is cut off the tape and a
 * fused kernel recorded in its place:
 *
 *   add, rmsNorm of its sum        -> add_rms_norm        (residual + next norm)
 *   rmsNorm, matmul needing q8_1   -> rms_norm_q8         (also after add: add_rms_norm_q8)
 *   matmuls of the same activations -> mmvq3_*           (q, k, v: up to three weights)
 *   attention, matmul needing q8_1 -> attn_combine_q8
 *   per-head rmsNorm, rope         -> rms_norm_rope       (also across the other head norm)
 *   matmul gate, matmul up, siluMul -> mmvq_gu_*          (one pass over both weights)
 *   the same for two expert stacks  -> mmvq_e_gu_*        (MoE gate and up)
 *
 * A fused kernel computes exactly what the sequence did and leaves every activation as the
 * sequence would have, so fusion never changes results. Notes only count while their
 * records are the tape's last ones; a flush drops them.
 */

import type { CudaContext } from "./context.ts";
import type { DeviceRope } from "./device_rope.ts";
import type { Kernel } from "./kernels.ts";
import type { DeviceRows, Note, NoteBody, Quantized } from "./notes.ts";
import type { CudaActivation, CudaWeight } from "./resources.ts";

export function same(a: DeviceRows, b: DeviceRows): boolean {
  return a.ptr === b.ptr && a.rows === b.rows && a.cols === b.cols;
}

/** The notes whose records end the tape, oldest first. */
function tail(ctx: CudaContext): Note[] {
  const notes = ctx.notes;
  let end = ctx.runner.tape.length;
  let i = notes.length - 1;
  while (i >= 0 && notes[i].end === end) end = notes[i--].start;
  return notes.slice(i + 1);
}

/** Notes `body` as what was recorded from `start` to the tape's end (when fusion is on). */
export function note(ctx: CudaContext, start: number, body: NoteBody | null): void {
  if (!ctx.fusion || body === null) return;
  const n = body as Note;
  n.start = start;
  n.end = ctx.runner.tape.length;
  ctx.notes.push(n);
  if (ctx.notes.length > 4) ctx.notes.shift();
}

/** Records what `emit` launches, noted as `body` when fusion is on. */
export function noted(ctx: CudaContext, body: NoteBody | null, emit: () => void): void {
  const start = ctx.runner.tape.length;
  emit();
  note(ctx, start, body);
}

function cut(ctx: CudaContext, at: number): void {
  ctx.runner.tape.truncate(at);
  ctx.notes.length = 0;
}

function launchNorm(ctx: CudaContext, n: Extract<Note, { kind: "norm" }>): void {
  const { out, x } = n;
  ctx.runner.tape.launch(ctx.k("rms_norm_block"), x.rows, 1, 1, 256)
    .p(out.ptr).p(x.ptr).p(n.w).i(x.rows).i(x.cols).f(n.eps).end();
}

/** rmsNorm over whole rows: fused with the add that produced `x` when there is one. */
export function recordRowNorm(
  ctx: CudaContext,
  out: CudaActivation,
  x: CudaActivation,
  w: CudaWeight,
  eps: number,
): void {
  const last = tail(ctx).at(-1);
  if (last?.kind === "add" && same(last.out, x)) {
    cut(ctx, last.start);
    const body: NoteBody = {
      kind: "addNorm",
      sum: last.out,
      out,
      a: last.a,
      b: last.b,
      w: w.ptr,
      eps,
    };
    noted(ctx, body, () => {
      ctx.runner.tape.launch(ctx.k("add_rms_norm"), x.rows, 1, 1, 256)
        .p(last.out.ptr).p(out.ptr).p(last.a.ptr).p(last.b.ptr).p(w.ptr)
        .i(x.rows).i(x.cols).f(eps).end();
    });
    return;
  }
  const body = { kind: "norm" as const, out, x, w: w.ptr, eps };
  noted(ctx, body, () => launchNorm(ctx, { ...body, start: 0, end: 0 }));
}

/**
 * Quantizes `x` by upgrading the record that produced it (a norm, add+norm or attention
 * combine) to its q8_1-writing form; false when the last record is none of those.
 */
export function fuseQuantize(ctx: CudaContext, x: CudaActivation, q: Quantized): boolean {
  const last = tail(ctx).at(-1);
  const tape = ctx.runner.tape;
  if (last?.kind === "norm" && same(last.out, x)) {
    cut(ctx, last.start);
    tape.launch(ctx.k("rms_norm_q8"), x.rows, 1, 1, 256)
      .p(last.out.ptr).p(q.xq).p(q.xd).p(last.x.ptr).p(last.w)
      .i(x.rows).i(x.cols).i(q.kp).f(last.eps).end();
    return true;
  }
  if (last?.kind === "addNorm" && same(last.out, x)) {
    cut(ctx, last.start);
    tape.launch(ctx.k("add_rms_norm_q8"), x.rows, 1, 1, 256)
      .p(last.sum.ptr).p(last.out.ptr).p(q.xq).p(q.xd).p(last.a.ptr).p(last.b.ptr).p(last.w)
      .i(x.rows).i(x.cols).i(q.kp).f(last.eps).end();
    return true;
  }
  if (last?.kind === "combine" && same(last.out, x) && last.heads * last.headDim === x.cols) {
    cut(ctx, last.start);
    tape.launch(ctx.k("attn_combine_q8"), last.heads, x.rows, 1, 128)
      .p(last.out.ptr).p(q.xq).p(q.xd).p(last.acc).p(last.ml).p(last.rowSeq)
      .i(last.heads).i(last.headDim).i(last.splits).i(q.kp).end();
    return true;
  }
  return false;
}

function launchHeadNorm(
  ctx: CudaContext,
  n: { x: DeviceRows; w: number; dim: number; eps: number },
): void {
  const groups = (n.x.rows * n.x.cols) / n.dim;
  ctx.runner.tape.launch(ctx.k("rms_norm_warp"), Math.ceil(groups / 4), 1, 1, 128)
    .p(n.x.ptr).p(n.x.ptr).p(n.w).i(groups).i(n.dim).f(n.eps).end();
}

/** rmsNorm per head in place (noted: a RoPE of the same heads can fuse with it). */
export function recordHeadNorm(
  ctx: CudaContext,
  x: CudaActivation,
  w: CudaWeight,
  dim: number,
  eps: number,
): void {
  const body = { kind: "headNorm" as const, x, w: w.ptr, dim, eps };
  noted(ctx, body, () => launchHeadNorm(ctx, body));
}

/**
 * RoPE of `x` (either layout, any scaling and factors) fused into its per-head norm when
 * that norm is the last record or the one before a norm of other heads (q-norm, k-norm,
 * rope q, rope k); false when not fusable.
 */
export function fuseRope(
  ctx: CudaContext,
  x: CudaActivation,
  positions: number,
  heads: number,
  dim: number,
  rope: DeviceRope,
): boolean {
  const notes = tail(ctx);
  const headNorms = notes.map((n) => (n.kind === "headNorm" ? n : null));
  const last = headNorms.at(-1) ?? null;
  const prev = headNorms.at(-2) ?? null;
  const fits = (n: Extract<Note, { kind: "headNorm" }> | null): boolean =>
    n !== null && same(n.x, x) && n.dim === dim && heads * dim === x.cols;
  let norm: Extract<Note, { kind: "headNorm" }>;
  let other: Extract<Note, { kind: "headNorm" }> | null = null;
  if (last !== null && fits(last)) {
    norm = last;
  } else if (prev !== null && last !== null && fits(prev) && last.x.ptr !== x.ptr) {
    norm = prev;
    other = last;
  } else {
    return false;
  }
  cut(ctx, norm.start);
  ctx.runner.tape.launch(ctx.k("rms_norm_rope"), Math.ceil((x.rows * heads) / 4), 1, 1, 128)
    .p(x.ptr).p(norm.w).p(positions).opt(rope.factors).i(x.rows).i(heads).i(dim).f(norm.eps)
    .f(rope.base).f(rope.freqScale).f(rope.extFactor).f(rope.corrLow).f(rope.corrHigh)
    .f(rope.mscale).i(rope.norm).end();
  if (other !== null) {
    const o = other;
    noted(
      ctx,
      { kind: "headNorm", x: o.x, w: o.w, dim: o.dim, eps: o.eps },
      () => launchHeadNorm(ctx, o),
    );
  }
  return true;
}

type MatvecNote = Extract<Note, { kind: "mmvq" }>;

function launchMatvecs(
  ctx: CudaContext,
  m: Omit<MatvecNote, "start" | "end">,
  kernel: Kernel,
): void {
  const { parts, q, n, tpr } = m;
  const w0 = parts[0].w;
  const rpc = 128 / tpr;
  const tape = ctx.runner.tape;
  if (parts.length === 1) {
    tape.launch(kernel, Math.ceil(w0.rows / rpc), 1, 1, 128)
      .p(parts[0].out.ptr).p(w0.ptr).p(q.xq).p(q.xd)
      .i(w0.rows).i(w0.cols).i(w0.rowBytes).i(q.kp).i(n).i(tpr).end();
    return;
  }
  // A missing third part repeats the second with no rows.
  const p = [parts[0], parts[1], parts[2] ?? parts[1]];
  const rows = [p[0].w.rows, p[1].w.rows, parts.length === 3 ? p[2].w.rows : 0];
  const blocks = rows.reduce((s, r) => s + Math.ceil(r / rpc), 0);
  tape.launch(ctx.k(`mmvq3_${m.name}_${m.instance}`), blocks, 1, 1, 128)
    .p(p[0].out.ptr).p(p[1].out.ptr).p(p[2].out.ptr).p(p[0].w.ptr).p(p[1].w.ptr).p(p[2].w.ptr)
    .i(rows[0]).i(rows[1]).i(rows[2]).p(q.xq).p(q.xd)
    .i(w0.cols).i(w0.rowBytes).i(q.kp).i(n).i(tpr).end();
}

/**
 * A q8_1 mat-vec product (`kernel` for one weight), merged into the last record when that
 * is up to two products of the same activations with weights of the same type and width.
 */
export function recordMatvec(
  ctx: CudaContext,
  out: CudaActivation,
  w: CudaWeight,
  q: Quantized,
  plan: { name: string; instance: number; n: number; tpr: number },
  kernel: Kernel,
): void {
  const last = tail(ctx).at(-1);
  if (
    last?.kind === "mmvq" && last.parts.length < 3 && last.q.xq === q.xq && last.q.kp === q.kp &&
    last.name === plan.name && last.n === plan.n && last.tpr === plan.tpr &&
    last.parts[0].w.cols === w.cols && last.parts.every((p) => p.out.ptr !== out.ptr)
  ) {
    cut(ctx, last.start);
    const merged = { ...last, parts: [...last.parts, { out, w }] };
    noted(ctx, merged, () => launchMatvecs(ctx, merged, kernel));
    return;
  }
  const body = { kind: "mmvq" as const, parts: [{ out, w }], q, ...plan };
  noted(ctx, body, () => launchMatvecs(ctx, body, kernel));
}

/** silu(gate) * up as one pass over both weights when the two products were just recorded. */
export function fuseGateUp(
  ctx: CudaContext,
  out: CudaActivation,
  gate: CudaActivation,
  up: CudaActivation,
): boolean {
  const last = tail(ctx).at(-1);
  if (last?.kind === "experts") return fuseExpertsGateUp(ctx, last, out, gate, up);
  if (last?.kind !== "mmvq" || last.parts.length !== 2) return false;
  const g = last.parts.find((p) => same(p.out, gate));
  const u = last.parts.find((p) => same(p.out, up));
  if (g === undefined || u === undefined || g === u) return false;
  if (g.w.rows !== u.w.rows || out.rows < last.n || out.cols !== g.w.rows) return false;
  cut(ctx, last.start);
  const { q, n, tpr } = last;
  const w = g.w;
  ctx.runner.tape.launch(
    ctx.k(`mmvq_gu_${last.name}_${last.instance}`),
    Math.ceil(w.rows / (128 / tpr)),
    1,
    1,
    128,
  )
    .p(out.ptr).p(gate.ptr).p(up.ptr).p(w.ptr).p(u.w.ptr).p(q.xq).p(q.xd)
    .i(w.rows).i(w.cols).i(w.rowBytes).i(q.kp).i(n).i(tpr).end();
  return true;
}

function fuseExpertsGateUp(
  ctx: CudaContext,
  last: Extract<Note, { kind: "experts" }>,
  out: CudaActivation,
  gate: CudaActivation,
  up: CudaActivation,
): boolean {
  const [g, u] = last.outs;
  if (!same(g, gate) || !same(u, up) || out.rows !== gate.rows || out.cols !== gate.cols) {
    return false;
  }
  cut(ctx, last.start);
  const l = last.launch;
  ctx.runner.tape.launch(ctx.k(`mmvq_e_gu_${l.name}_${l.nt}`), l.grid, l.groups, 1, 128)
    .p(out.ptr).p(gate.ptr).p(up.ptr).p(last.weights[0]).p(last.weights[1]).i(l.stride)
    .p(l.q.xq).p(l.q.xd).p(l.order).p(l.gexp).p(l.gstart)
    .i(l.rows).i(l.cols).i(l.rowBytes).i(l.q.kp).i(l.perSlot).i(l.k).i(l.tpr).end();
  return true;
}
