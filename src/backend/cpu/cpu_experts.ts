/**
 * Expert stacks on the CPU backend: in place in the mapped GGUF (each expert at its stride,
 * a rank's slice of rows included), or copied into the weight arena with the experts
 * packed one after another; and the expert ops recorded in the op list once their
 * activations are checked to fit together.
 */

import type { Activation, ExpertSource, ExpertWeight } from "../backend.ts";
import type { GgmlTypeInfo } from "../../gguf/types.ts";
import { CpuKernelError } from "./errors.ts";
import type { OpList } from "./op_list.ts";

/** An activation's native address. */
type PointerOf = (a: Activation) => Deno.PointerObject;

export class CpuExperts implements ExpertWeight {
  constructor(
    readonly name: string,
    readonly type: GgmlTypeInfo,
    readonly experts: number,
    readonly rows: number,
    readonly cols: number,
    readonly pointer: Deno.PointerObject,
    /** Bytes from one expert's first row to the next's. */
    readonly stride: number,
    /** The type the kernels read it as: the GGUF type, or the one it was repacked into
     * (repacked.ts). */
    readonly kernelType: number = type.id,
  ) {}
}

/** Checks that `source` holds its experts; returns the bytes of one expert's rows. */
export function expertBytes(source: ExpertSource, rowBytes: number): number {
  const bytes = source.rows * rowBytes;
  const needed = (source.experts - 1) * source.expertStride + bytes;
  if (
    !(Number.isSafeInteger(source.experts) && source.experts > 0) ||
    source.expertStride < bytes || source.bytes.byteLength < needed
  ) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${source.name}: ${source.bytes.byteLength} bytes at a stride of ${source.expertStride} ` +
        `for ${source.experts} experts of ${source.rows}x${source.cols} ${source.type.name} ` +
        `(${needed} needed)`,
    );
  }
  return bytes;
}

/** The experts of `source` one after another (a copy without another rank's rows). */
export function packedExperts(source: ExpertSource, bytes: number): Uint8Array {
  if (source.expertStride === bytes) return source.bytes.subarray(0, source.experts * bytes);
  const out = new Uint8Array(source.experts * bytes);
  for (let e = 0; e < source.experts; e++) {
    const at = e * source.expertStride;
    out.set(source.bytes.subarray(at, at + bytes), e * bytes);
  }
  return out;
}

function fail(op: string, what: string): never {
  throw new CpuKernelError("cpu_kernel_invalid", `${op}: ${what}`);
}

/** Records routeExperts (shapes checked: a row of ids and weights per row of logits). */
export function recordRoute(
  queue: OpList,
  at: PointerOf,
  ids: Activation,
  weights: Activation,
  logits: Activation,
  normalize: boolean,
): void {
  if (ids.rows !== logits.rows || weights.rows !== logits.rows || weights.cols !== ids.cols) {
    fail(
      "routeExperts",
      `ids ${ids.rows}x${ids.cols} and weights ${weights.rows}x${weights.cols} for ` +
        `${logits.rows} rows of logits`,
    );
  }
  queue.moeRoute(at(logits), logits.rows, logits.cols, ids.cols, normalize, at(ids), at(weights));
}

/** Records matmulExperts, its shapes checked. */
export function recordMatmulExperts(
  queue: OpList,
  at: PointerOf,
  outs: Activation[],
  ws: ExpertWeight[],
  x: Activation,
  ids: Activation,
): void {
  const k = ids.cols;
  if (outs.length !== ws.length || ws.length === 0) {
    fail("matmulExperts", `${outs.length} outputs for ${ws.length} expert stacks`);
  }
  const experts = ws[0].experts;
  ws.forEach((w, m) => {
    if (w.experts !== experts || w.cols !== x.cols) {
      fail("matmulExperts", `${w.name} is ${w.experts} experts of ${w.cols} columns`);
    }
    if (outs[m].rows !== ids.rows * k || outs[m].cols !== w.rows) {
      fail("matmulExperts", `output ${m} is ${outs[m].rows}x${outs[m].cols}`);
    }
  });
  if (x.rows !== ids.rows && x.rows !== ids.rows * k) {
    fail("matmulExperts", `x has ${x.rows} rows for ${ids.rows} tokens of ${k} experts`);
  }
  const mats = ws.map((w, m) => {
    const e = w as CpuExperts;
    return { type: e.kernelType, w: e.pointer, stride: e.stride, rows: e.rows, y: at(outs[m]) };
  });
  queue.matmulExperts(mats, experts, x.cols, at(x), x.rows, at(ids), ids.rows, k);
}

/** Records combineExperts, its shapes checked. */
export function recordCombine(
  queue: OpList,
  at: PointerOf,
  out: Activation,
  experts: Activation,
  weights: Activation,
): void {
  if (
    weights.rows !== out.rows || experts.rows !== out.rows * weights.cols ||
    experts.cols !== out.cols
  ) {
    fail(
      "combineExperts",
      `${experts.rows}x${experts.cols} expert rows, ${weights.rows}x${weights.cols} weights ` +
        `into ${out.rows}x${out.cols}`,
    );
  }
  queue.moeCombine(at(out), at(experts), at(weights), out.rows, weights.cols, out.cols);
}
