/**
 * Recording the row lookups (kernels/cuda/elementwise.cu): `get_rows`, the embedding of
 * token ids, and `gather_rows`, the rows whose logits a step wants. Both index a tensor by
 * integers from the host: each is checked against the rows it picks from before anything
 * is recorded (the kernels read wherever an index points), then travels in the step arena
 * with the step's other integers.
 */

import type { Activation, Weight } from "../backend.ts";
import type { CudaContext } from "./context.ts";
import { invalidArgument } from "./errors.ts";
import { asActivation, asWeight, type CudaActivation } from "./resources.ts";

/** out[i] = row ids[i] of `table`, dequantized to f32; returns out. */
export function recordEmbed(
  ctx: CudaContext,
  out: Activation,
  table: Weight,
  ids: Int32Array,
): CudaActivation {
  const o = asActivation(out, "embed");
  const t = asWeight(table, "embed");
  if (o.cols !== t.cols || o.rows < ids.length || ids.length === 0) {
    throw invalidArgument("embed", `${ids.length} ids into ${o.rows}x${o.cols} from ${t.name}`);
  }
  const dev = putIndices(ctx, "embed", "token id", ids, t.rows);
  ctx.runner.tape.launch(ctx.k("get_rows"), Math.ceil(t.cols / 256), ids.length, 1, 256)
    .p(o.ptr).p(t.ptr).i(t.type.id).p(dev).i(ids.length).i(t.cols).i(t.rowBytes).end();
  return o;
}

/** out[i] = row rows[i] of `a`; returns out. */
export function recordGatherRows(
  ctx: CudaContext,
  out: Activation,
  a: Activation,
  rows: Int32Array,
): CudaActivation {
  const o = asActivation(out, "gatherRows");
  const x = asActivation(a, "gatherRows");
  if (o.cols !== x.cols || o.rows < rows.length || rows.length === 0) {
    throw invalidArgument(
      "gatherRows",
      `${rows.length} rows of ${x.rows}x${x.cols} into ${o.rows}x${o.cols}`,
    );
  }
  const idx = putIndices(ctx, "gatherRows", "row", rows, x.rows);
  ctx.runner.tape.launch(ctx.k("gather_rows"), Math.ceil(x.cols / 256), rows.length, 1, 256)
    .p(o.ptr).p(x.ptr).p(idx).i(rows.length).i(x.cols).end();
  return o;
}

/** The indices, each checked to name one of `limit` rows, put in the step arena; returns
 * their device address. */
function putIndices(
  ctx: CudaContext,
  op: string,
  what: string,
  indices: Int32Array,
  limit: number,
): number {
  for (const i of indices) {
    if (!(i >= 0 && i < limit)) throw invalidArgument(op, `${what} ${i} of ${limit}`);
  }
  ctx.reserveArena(4 * indices.length + 64);
  return ctx.arena.put(indices);
}
