/**
 * Tensor-parallel slices of routed experts: every rank holds a slice of every expert, FFN
 * columns [start, start + count) of each, with the router whole. Gate and up are split by
 * output rows (a pointer into the mapped file with the whole expert's stride), down by
 * input columns (copied at load).
 *
 * Expert FFNs are narrow (Qwen3-30B-A3B: 768 columns, three Q4_K blocks per row of its
 * down projections), so an even split would often cut a block: the columns go out in
 * whole blocks of the widest block any layer's down projection has, as evenly as they
 * divide (768 over two ranks: 256 and 512).
 */

import type { GgufFile, GgufTensorInfo } from "../gguf/mod.ts";
import { rowBytes } from "../gguf/types.ts";
import { ShardError } from "./errors.ts";
import type { DecoderHparams } from "./hparams.ts";

/** A rank's run of an expert's FFN columns. */
export interface FfSpan {
  start: number;
  count: number;
}

/** The expert FFN columns rank `rank` of `size` holds. */
export function expertFfSpan(
  file: GgufFile,
  hp: DecoderHparams,
  size: number,
  rank: number,
): FfSpan {
  let unit = 1;
  let widest = "";
  for (let i = 0; i < hp.nLayers; i++) {
    const t = file.requireTensor(`blk.${i}.ffn_down_exps.weight`);
    if (t.type.blockSize > unit) [unit, widest] = [t.type.blockSize, t.type.name];
  }
  const units = Math.floor(hp.nFf / unit);
  if (units < size) {
    throw new ShardError(
      `cannot split the ${hp.nFf} FFN columns of each expert over ${size} ranks: ffn_down_exps ` +
        `(${widest}) has only ${units} whole blocks of ${unit} per row`,
    );
  }
  const at = (r: number) => Math.floor((r * units) / size) * unit;
  const end = rank === size - 1 ? hp.nFf : at(rank + 1);
  return { start: at(rank), count: end - at(rank) };
}

export interface ExpertSlice {
  rows: number;
  cols: number;
  bytes: Uint8Array;
  pointer: Deno.PointerObject;
  expertStride: number;
  transient: boolean;
}

/** This rank's part of the expert stack `t` (`experts` of `cols` x `rows`). */
export function sliceExperts(
  file: GgufFile,
  t: GgufTensorInfo,
  experts: number,
  rows: number,
  cols: number,
  split: { by: "rows" | "cols"; span: FfSpan },
): ExpertSlice {
  const rb = rowBytes(t.type, cols);
  const stride = rows * rb;
  const data = file.data(t);
  const { start, count } = split.span;
  if (split.by === "rows") {
    const from = start * rb;
    return {
      rows: count,
      cols,
      bytes: data.subarray(from, (experts - 1) * stride + (start + count) * rb),
      pointer: Deno.UnsafePointer.offset(file.pointer(t), from)!,
      expertStride: stride,
      transient: false,
    };
  }
  const offset = rowBytes(t.type, start);
  const part = rowBytes(t.type, count);
  const copy = new Uint8Array(experts * rows * part);
  for (let r = 0; r < experts * rows; r++) {
    copy.set(data.subarray(r * rb + offset, r * rb + offset + part), r * part);
  }
  return {
    rows,
    cols: count,
    bytes: copy,
    pointer: Deno.UnsafePointer.of(copy)!,
    expertStride: rows * part,
    transient: true,
  };
}
