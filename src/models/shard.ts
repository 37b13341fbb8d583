/**
 * Tensor-parallel slices of a decoder (every family splits alike). Rank r of N holds attention heads [r·H/N, (r+1)·H/N)
 * with their KV heads and FFN columns [r·F/N, (r+1)·F/N):
 *
 * - Q, K, V, gate and up are split by output rows: contiguous in the GGUF, so a rank's
 *   slice is a pointer into the mapped file.
 * - attn_output and ffn_down are split by input columns: each row contributes a run of
 *   whole quantization blocks, copied at load. A split that would cut a block (e.g. 128 of
 *   Q4_K's 256 values) is refused: requantizing would change the model's numbers.
 *
 * The row-split products are partial sums; the model adds them over the ranks
 * (Collective.allReduceSum) before the residual. Embeddings, norms and the output head are
 * whole on every rank. N = 1 is the whole model, untouched.
 */

import type { GgufFile, GgufTensorInfo } from "../gguf/mod.ts";
import { rowBytes } from "../gguf/types.ts";
import { ShardError } from "./errors.ts";
import { expertFfSpan, type FfSpan } from "./expert_shard.ts";
import type { DecoderHparams } from "./hparams.ts";

/** The counts one rank holds. */
export interface ShardDims {
  nHeads: number;
  nKvHeads: number;
  nFf: number;
  /** Routed experts: the columns of each expert this rank holds (expert_shard.ts). */
  ffSpan?: FfSpan;
}

/** One rank's part of a tensor: its output rows, or its input columns. */
export interface TensorSplit {
  by: "rows" | "cols";
  index: number;
  parts: number;
}

/**
 * The tensors split by input columns, whose split must keep quantization blocks whole
 * (routed experts' down projections: expert_shard.ts).
 */
function columnSplitTensors(hp: DecoderHparams): Array<{ name: string; cols: number }> {
  return Array.from({ length: hp.nLayers }, (_, i) => [
    { name: `blk.${i}.attn_output.weight`, cols: hp.nHeads * hp.headDim },
    ...(hp.experts ? [] : [{ name: `blk.${i}.ffn_down.weight`, cols: hp.nFf }]),
  ]).flat();
}

/**
 * The counts rank `rank` holds when `hp` is split over `size` ranks, after checking that
 * heads, KV heads and FFN columns divide evenly and that every column split keeps whole
 * blocks.
 */
export function shardDims(file: GgufFile, hp: DecoderHparams, size: number, rank = 0): ShardDims {
  if (!Number.isInteger(size) || size < 1) {
    throw new ShardError(`tensor_parallel must be a positive integer, got ${size}`);
  }
  const ffSpan = hp.experts ? expertFfSpan(file, hp, size, rank) : undefined;
  if (size === 1) return { nHeads: hp.nHeads, nKvHeads: hp.nKvHeads, nFf: hp.nFf, ffSpan };
  const counts: Array<[string, number]> = [
    ["attention heads", hp.nHeads],
    ["KV heads", hp.nKvHeads],
    ...(hp.experts ? [] : [["FFN columns", hp.nFf] as [string, number]]),
  ];
  for (const [what, n] of counts) {
    if (n % size !== 0) {
      throw new ShardError(
        `cannot split the model over ${size} ranks: its ${n} ${what} do not divide by ${size}`,
      );
    }
  }
  for (const { name, cols } of columnSplitTensors(hp)) {
    const t = file.requireTensor(name);
    const part = cols / size;
    if (part % t.type.blockSize !== 0) {
      throw new ShardError(
        `cannot split ${name} (${t.type.name}) over ${size} ranks: ${part} of its ${cols} ` +
          `input columns per rank is not a whole number of ${t.type.name} blocks ` +
          `(${t.type.blockSize} values each), and requantizing would change the model`,
      );
    }
  }
  const nFf = ffSpan?.count ?? hp.nFf / size;
  return { nHeads: hp.nHeads / size, nKvHeads: hp.nKvHeads / size, nFf, ffSpan };
}

export interface SliceSource {
  rows: number;
  cols: number;
  bytes: Uint8Array;
  pointer: Deno.PointerObject;
  transient: boolean;
}

/** The bytes of this rank's part of `t` (`cols` x `rows` as a whole). */
export function sliceTensor(
  file: GgufFile,
  t: GgufTensorInfo,
  rows: number,
  cols: number,
  split: TensorSplit,
): SliceSource {
  const rb = rowBytes(t.type, cols);
  const data = file.data(t);
  if (split.by === "rows") {
    const n = rows / split.parts;
    const start = split.index * n * rb;
    return {
      rows: n,
      cols,
      bytes: data.subarray(start, start + n * rb),
      pointer: Deno.UnsafePointer.offset(file.pointer(t), start)!,
      transient: false,
    };
  }
  const n = cols / split.parts;
  const partBytes = rowBytes(t.type, n);
  const offset = split.index * partBytes;
  const copy = new Uint8Array(rows * partBytes);
  for (let r = 0; r < rows; r++) {
    copy.set(data.subarray(r * rb + offset, r * rb + offset + partBytes), r * partBytes);
  }
  return {
    rows,
    cols: n,
    bytes: copy,
    pointer: Deno.UnsafePointer.of(copy)!,
    transient: true,
  };
}
