/**
 * Mixture-of-experts ops on CUDA (kernels/cuda/moe.cu): expert stacks uploaded packed,
 * routing on the device, the (token, slot) rows grouped by expert on the device and each
 * chosen expert's rows multiplied by one grid row of blocks, and the weighted sum. The
 * expert indices never leave the device, so the launches of a decode step are the same
 * whatever its tokens choose, and the step is captured as a CUDA graph like any other.
 */

import { rowBytes } from "../../gguf/types.ts";
import type { GgmlTypeInfo } from "../../gguf/types.ts";
import type { ExpertSource, ExpertWeight } from "../backend.ts";
import type { CudaContext, MoeGrouping } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import { upload } from "./loading.ts";
import { expertsTiled, expertThreadsPerRow, matvecPlan, supportedType } from "./matmul_plan.ts";
import { quantized } from "./ops_matmul.ts";
import { note, same } from "./fusion.ts";
import type { ExpertLaunch } from "./notes.ts";
import type { CudaActivation } from "./resources.ts";

/** llama.cpp's LLAMA_MAX_EXPERTS (moe.cu's MOE_MAX_EXPERTS). */
const MAX_EXPERTS = 512;
/** Threads of moe_group (MOE_GROUP_THREADS of moe.cu). */
const MOE_GROUP_THREADS = 512;
const THREADS = 128;
/** Weight rows per block of the tiled products (moe_gemm.cu's GT_ROWS). */
const TILE_ROWS = 64;

export class CudaExperts implements ExpertWeight {
  constructor(
    readonly name: string,
    readonly type: GgmlTypeInfo,
    readonly experts: number,
    readonly rows: number,
    readonly cols: number,
    readonly ptr: number,
    readonly rowBytes: number,
  ) {}

  /** Bytes from one expert to the next: they are packed. */
  get stride(): number {
    return this.rows * this.rowBytes;
  }
}

/** Copies the experts of `source` to the device, one after another. */
export function uploadExperts(ctx: CudaContext, source: ExpertSource): CudaExperts {
  const { name, type, experts, rows, cols, expertStride } = source;
  if (!supportedType(type) || !(rows >= 1 && cols >= 1) || cols % type.blockSize !== 0) {
    throw invalidArgument("loadExperts", `${name}: ${rows}x${cols} of ${type.name}`);
  }
  const rb = rowBytes(type, cols);
  const bytes = rows * rb;
  const needed = (experts - 1) * expertStride + bytes;
  if (
    !(experts >= 1 && experts <= MAX_EXPERTS) || expertStride < bytes ||
    source.bytes.byteLength < needed || bytes > 0x7fffffff
  ) {
    throw invalidArgument(
      "loadExperts",
      `${name}: ${experts} experts of ${bytes} bytes at a stride of ${expertStride} in ` +
        `${source.bytes.byteLength}`,
    );
  }
  let src = source.pointer;
  if (expertStride !== bytes) {
    const packed = new Uint8Array(new ArrayBuffer(experts * bytes));
    for (let e = 0; e < experts; e++) {
      packed.set(source.bytes.subarray(e * expertStride, e * expertStride + bytes), e * bytes);
    }
    src = Deno.UnsafePointer.of(packed)!;
  }
  const ptr = upload(ctx, experts * bytes, src);
  return new CudaExperts(name, type, experts, rows, cols, ptr, rb);
}

export function asExperts(w: ExpertWeight, op: string): CudaExperts {
  if (!(w instanceof CudaExperts)) throw invalidArgument(op, "not experts of this backend");
  return w;
}

export function recordRoute(
  ctx: CudaContext,
  ids: CudaActivation,
  weights: CudaActivation,
  logits: CudaActivation,
  normalize: boolean,
): void {
  const k = ids.cols;
  if (
    logits.cols > MAX_EXPERTS || k > logits.cols || ids.rows !== logits.rows ||
    weights.rows !== logits.rows || weights.cols !== k
  ) {
    throw invalidArgument(
      "routeExperts",
      `${ids.rows}x${k} ids, ${weights.rows}x${weights.cols} weights for ${logits.rows}x` +
        `${logits.cols} logits (at most ${MAX_EXPERTS} experts)`,
    );
  }
  // One row (a decode step): the route writes moe_group's grouping too, for the products
  // that follow (grouped() finds it cached).
  const grouping = logits.rows === 1 ? groupingBuffers(ctx, ids, logits.cols) : null;
  ctx.runner.tape.launch(ctx.k("moe_route"), logits.rows, 1, 1, THREADS)
    .p(ids.ptr).p(weights.ptr).p(logits.ptr).i(logits.rows).i(logits.cols).i(k)
    .i(normalize ? 1 : 0).opt(grouping?.order ?? 0).opt(grouping?.gexp ?? 0)
    .opt(grouping?.gstart ?? 0).end();
  ctx.grouping = grouping;
}

export function recordMatmulExperts(
  ctx: CudaContext,
  outs: CudaActivation[],
  ws: CudaExperts[],
  x: CudaActivation,
  ids: CudaActivation,
): void {
  const tokens = ids.rows, k = ids.cols, slots = tokens * k;
  if (outs.length !== ws.length || ws.length === 0 || (x.rows !== tokens && x.rows !== slots)) {
    throw invalidArgument(
      "matmulExperts",
      `${outs.length} outputs, ${ws.length} stacks, x of ${x.rows} rows for ${tokens}x${k}`,
    );
  }
  const experts = ws[0].experts;
  ws.forEach((w, m) => {
    if (
      w.experts !== experts || w.cols !== x.cols || outs[m].rows < slots ||
      outs[m].cols !== w.rows
    ) {
      throw invalidArgument(
        "matmulExperts",
        `${w.name} with output ${outs[m].rows}x${outs[m].cols}`,
      );
    }
  });
  const { order, gexp, gstart, groups } = grouped(ctx, ids, experts);
  const tape = ctx.runner.tape;
  const perSlot = x.rows === slots ? 1 : 0;
  const nt = tokens === 1 ? 1 : 8;
  const plans = ws.map((w) => matvecPlan(w.type, w.cols));
  const q = plans.some((p) => p.kind === "q8") ? quantized(ctx, x) : null;
  // From here the products alone: two of them on q8_1 (gate and up) are noted for fusion
  // with the silu_mul that follows (fusion.ts).
  const start = tape.length;
  const launches: ExpertLaunch[] = [];
  ws.forEach((w, m) => {
    const y = outs[m].ptr;
    const plan = plans[m];
    if (plan.kind === "any") {
      tape.launch(ctx.k("mmv_any_e"), Math.ceil(w.rows / 4), groups, 1, THREADS)
        .p(y).p(w.ptr).i(w.stride).i(w.type.id).p(x.ptr).p(order).p(gexp).p(gstart)
        .i(w.rows).i(w.cols).i(w.rowBytes).i(perSlot).i(k).end();
      return;
    }
    if (plan.kind === "q8" && q !== null && expertsTiled(plan, slots, experts)) {
      tape.launch(ctx.k(`mmq_e_${plan.name}`), Math.ceil(w.rows / TILE_ROWS), groups, 1, THREADS)
        .p(y).p(w.ptr).i(w.stride).p(q.xq).p(q.xd).p(order).p(gexp).p(gstart)
        .i(w.rows).i(w.cols).i(w.rowBytes).i(q.kp).i(perSlot).i(k).end();
      return;
    }
    const tpr = expertThreadsPerRow(w.cols / plan.unitValues);
    const grid = Math.ceil(w.rows / (THREADS / tpr));
    if (plan.kind === "q8" && q !== null) {
      const l: ExpertLaunch = {
        name: plan.name,
        nt,
        grid,
        groups,
        stride: w.stride,
        rows: w.rows,
        cols: w.cols,
        rowBytes: w.rowBytes,
        q,
        order,
        gexp,
        gstart,
        perSlot,
        k,
        tpr,
      };
      launches.push(l);
      tape.launch(ctx.k(`mmvq_e_${l.name}_${nt}`), grid, groups, 1, THREADS)
        .p(y).p(w.ptr).i(l.stride).p(q.xq).p(q.xd).p(order).p(gexp).p(gstart)
        .i(l.rows).i(l.cols).i(l.rowBytes).i(q.kp).i(perSlot).i(k).i(tpr).end();
      return;
    }
    tape.launch(ctx.k(`mmv_e_${plan.name}_${nt}`), grid, groups, 1, THREADS)
      .p(y).p(w.ptr).i(w.stride).p(x.ptr).p(order).p(gexp).p(gstart)
      .i(w.rows).i(w.cols).i(w.rowBytes).i(perSlot).i(k).i(tpr).end();
  });
  const [a, b] = launches;
  if (
    launches.length === 2 && ws.length === 2 && a.name === b.name && a.rows === b.rows &&
    a.stride === b.stride && a.rowBytes === b.rowBytes
  ) {
    note(ctx, start, {
      kind: "experts",
      outs: [outs[0], outs[1]],
      weights: [ws[0].ptr, ws[1].ptr],
      launch: a,
    });
  }
}

/**
 * The (token, slot) rows of `ids` grouped by expert (moe_group), shared by the products
 * that read the same ids (gate and up, then down) until something writes ids or the step
 * ends, as quantized activations are.
 */
function grouped(ctx: CudaContext, ids: CudaActivation, experts: number): MoeGrouping {
  const g = groupingBuffers(ctx, ids, experts);
  const cached = ctx.grouping;
  if (cached !== null && same(cached.src, ids) && cached.experts === experts) return cached;
  ctx.runner.tape.launch(ctx.k("moe_group"), 1, 1, 1, MOE_GROUP_THREADS)
    .p(g.order).p(g.gexp).p(g.gstart).p(ids.ptr).i(ids.rows * ids.cols).i(experts).i(g.groups)
    .end();
  ctx.grouping = g;
  return g;
}

/** The scratch buffers a grouping of `ids` over `experts` goes to (growing one flushes). */
function groupingBuffers(ctx: CudaContext, ids: CudaActivation, experts: number): MoeGrouping {
  const slots = ids.rows * ids.cols;
  const groups = Math.min(experts, slots);
  return {
    src: { ptr: ids.ptr, rows: ids.rows, cols: ids.cols },
    experts,
    order: ctx.scratch("moe_order", 4 * slots),
    gexp: ctx.scratch("moe_gexp", 4 * groups),
    gstart: ctx.scratch("moe_gstart", 4 * (groups + 1)),
    groups,
  };
}

export function recordCombine(
  ctx: CudaContext,
  out: CudaActivation,
  experts: CudaActivation,
  weights: CudaActivation,
): void {
  const k = weights.cols;
  if (weights.rows !== out.rows || experts.rows < out.rows * k || experts.cols !== out.cols) {
    throw invalidArgument(
      "combineExperts",
      `${experts.rows}x${experts.cols} expert rows, ${weights.rows}x${k} weights into ` +
        `${out.rows}x${out.cols}`,
    );
  }
  ctx.runner.tape.launch(ctx.k("moe_combine"), Math.ceil(out.cols / 256), out.rows, 1, 256)
    .p(out.ptr).p(experts.ptr).p(weights.ptr).i(out.rows).i(k).i(out.cols).end();
}
