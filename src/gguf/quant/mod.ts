/**
 * Reference quantizers (ggml's `quantize_row_*_ref`, no importance matrix) and random
 * valid blocks, so tests and benchmarks can make tensors and models of any shape.
 */

import { GgufError } from "../errors.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo, requireGgmlType } from "../types.ts";
import { quantizeBf16, quantizeF16, quantizeF32 } from "./simple.ts";
import { quantizeQ4_0, quantizeQ4_1, quantizeQ5_0, quantizeQ5_1, quantizeQ8_0 } from "./legacy.ts";
import {
  quantizeQ2_K,
  quantizeQ3_K,
  quantizeQ4_K,
  quantizeQ5_K,
  quantizeQ6_K,
} from "./k_quants.ts";

export { canRandomize, fillRandomBlocks, randomBlocks } from "./random.ts";

/** Reads `nBlocks` blocks' worth of values (n for the plain types) from `src` into `dst`. */
type BlockQuantizer = (src: Float32Array, dst: Uint8Array, nBlocks: number) => void;

const QUANTIZERS = new Map<number, BlockQuantizer>([
  [GgmlType.F32, quantizeF32],
  [GgmlType.F16, quantizeF16],
  [GgmlType.BF16, quantizeBf16],
  [GgmlType.Q4_0, quantizeQ4_0],
  [GgmlType.Q4_1, quantizeQ4_1],
  [GgmlType.Q5_0, quantizeQ5_0],
  [GgmlType.Q5_1, quantizeQ5_1],
  [GgmlType.Q8_0, quantizeQ8_0],
  [GgmlType.Q2_K, quantizeQ2_K],
  [GgmlType.Q3_K, quantizeQ3_K],
  [GgmlType.Q4_K, quantizeQ4_K],
  [GgmlType.Q5_K, quantizeQ5_K],
  [GgmlType.Q6_K, quantizeQ6_K],
]);

/** The types with a reference quantizer, in ggml id order. */
export const QUANTIZABLE_TYPES: readonly GgmlTypeInfo[] = [...QUANTIZERS.keys()]
  .sort((a, b) => a - b)
  .map((id) => ggmlTypeInfo(id)!);

/**
 * Quantizes all of `src` (a whole number of blocks) into `dst`, which must hold
 * src.length / blockSize * typeSize bytes.
 */
export function quantizeRow(type: GgmlTypeInfo | number, src: Float32Array, dst: Uint8Array): void {
  const info = requireGgmlType(type);
  const fn = QUANTIZERS.get(info.id);
  if (fn === undefined) throw new GgufError("gguf_unsupported", `no quantizer for ${info.name}`);
  const n = src.length;
  if (n % info.blockSize !== 0) {
    throw new GgufError(
      "gguf_bad_tensor",
      `${n} values are not a whole number of ${info.name} blocks (${info.blockSize})`,
    );
  }
  const nBlocks = n / info.blockSize;
  if (dst.byteLength < nBlocks * info.typeSize) {
    throw new GgufError(
      "gguf_too_large",
      `${n} ${info.name} values need ${nBlocks * info.typeSize} bytes, got ${dst.byteLength}`,
    );
  }
  fn(src, dst, info.blockSize === 1 ? n : nBlocks);
}

/** Quantizes `values` (a whole number of blocks) into new bytes. */
export function quantize(type: GgmlTypeInfo | number, values: Float32Array): Uint8Array {
  const info = requireGgmlType(type);
  const out = new Uint8Array(Math.ceil(values.length / info.blockSize) * info.typeSize);
  quantizeRow(info, values, out);
  return out;
}
