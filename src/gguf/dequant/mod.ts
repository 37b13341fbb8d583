/**
 * Reference dequantizers: plain TypeScript mirrors of ggml's `dequantize_row_*`, the oracle
 * every fast kernel is checked against. Clear rather than fast, yet a 150k x 1024 tensor
 * takes well under a second per type.
 */

import { GgufError } from "../errors.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo, requireGgmlType } from "../types.ts";
import { dequantizeBf16, dequantizeF16, dequantizeF32 } from "./simple.ts";
import {
  dequantizeQ4_0,
  dequantizeQ4_1,
  dequantizeQ5_0,
  dequantizeQ5_1,
  dequantizeQ8_0,
} from "./legacy.ts";
import {
  dequantizeQ2_K,
  dequantizeQ3_K,
  dequantizeQ4_K,
  dequantizeQ5_K,
  dequantizeQ6_K,
} from "./k_quants.ts";

/** Writes `nBlocks` blocks' worth of values (n for the plain types) from `src` into `dst`. */
type BlockDequantizer = (src: Uint8Array, dst: Float32Array, nBlocks: number) => void;

const DEQUANTIZERS = new Map<number, BlockDequantizer>([
  [GgmlType.F32, dequantizeF32],
  [GgmlType.F16, dequantizeF16],
  [GgmlType.BF16, dequantizeBf16],
  [GgmlType.Q4_0, dequantizeQ4_0],
  [GgmlType.Q4_1, dequantizeQ4_1],
  [GgmlType.Q5_0, dequantizeQ5_0],
  [GgmlType.Q5_1, dequantizeQ5_1],
  [GgmlType.Q8_0, dequantizeQ8_0],
  [GgmlType.Q2_K, dequantizeQ2_K],
  [GgmlType.Q3_K, dequantizeQ3_K],
  [GgmlType.Q4_K, dequantizeQ4_K],
  [GgmlType.Q5_K, dequantizeQ5_K],
  [GgmlType.Q6_K, dequantizeQ6_K],
]);

/** The types with a reference dequantizer, in ggml id order. */
export const DEQUANTIZABLE_TYPES: readonly GgmlTypeInfo[] = [...DEQUANTIZERS.keys()]
  .sort((a, b) => a - b)
  .map((id) => ggmlTypeInfo(id)!);

/** Whether `type` has a reference dequantizer. */
export function canDequantize(type: GgmlTypeInfo | number): boolean {
  return DEQUANTIZERS.has(typeof type === "number" ? type : type.id);
}

/**
 * Dequantizes `dst.length` values of `type` from `src` (whole blocks: the length must be
 * a multiple of the block size and `src` must hold that many blocks).
 */
export function dequantizeRow(
  type: GgmlTypeInfo | number,
  src: Uint8Array,
  dst: Float32Array,
): void {
  const info = requireGgmlType(type);
  const fn = DEQUANTIZERS.get(info.id);
  if (fn === undefined) {
    throw new GgufError("gguf_unsupported", `no reference dequantizer for ${info.name}`);
  }
  const n = dst.length;
  if (n % info.blockSize !== 0) {
    throw new GgufError(
      "gguf_bad_tensor",
      `${n} values are not a whole number of ${info.name} blocks (${info.blockSize})`,
    );
  }
  const nBlocks = n / info.blockSize;
  if (src.byteLength < nBlocks * info.typeSize) {
    throw new GgufError(
      "gguf_truncated",
      `${n} ${info.name} values need ${nBlocks * info.typeSize} bytes, got ${src.byteLength}`,
    );
  }
  fn(src, dst, info.blockSize === 1 ? n : nBlocks);
}

/** Dequantizes the first `n` values of `type` in `bytes` into a new Float32Array. */
export function dequantize(
  type: GgmlTypeInfo | number,
  bytes: Uint8Array,
  n: number,
): Float32Array {
  const out = new Float32Array(n);
  dequantizeRow(type, bytes, out);
  return out;
}
