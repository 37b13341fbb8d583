/** The paged KV cache's layout as the kernels see it, and the checks of its operands. */

import { checkDims } from "./checks.ts";
import { CpuKernelError } from "./errors.ts";

/** KV cache element types (ggml ids). */
export const KV_F32 = 0;
export const KV_F16 = 1;
export type KvType = typeof KV_F32 | typeof KV_F16;

/** The paged KV cache of one layer: K and V are [nBlocks][blockSize][nKvHeads][headDim]. */
export interface KvLayout {
  type: KvType;
  nBlocks: number;
  blockSize: number;
  nKvHeads: number;
  headDim: number;
}

/** Bytes of one of K or V for a layer with this layout. */
export function kvCacheBytes(l: KvLayout): number {
  return l.nBlocks * l.blockSize * l.nKvHeads * l.headDim * (l.type === KV_F16 ? 2 : 4);
}

/** Positions and block table of a kv_store or attention call, before anything runs. */
export function checkPositions(
  op: string,
  l: KvLayout,
  blockTable: Int32Array,
  positions: Int32Array,
  nTokens: number,
): void {
  checkDims(op, {
    nTokens,
    nBlocks: l.nBlocks,
    blockSize: l.blockSize,
    nKvHeads: l.nKvHeads,
    headDim: l.headDim,
  });
  if (positions.length < nTokens) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${op}: ${positions.length} positions for ${nTokens} tokens`,
    );
  }
  for (let t = 0; t < nTokens; t++) {
    const p = positions[t];
    const b = Math.floor(p / l.blockSize);
    if (p < 0 || b >= blockTable.length) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: position ${p} outside the block table`,
      );
    }
  }
  for (const b of blockTable) {
    if (b < 0 || b >= l.nBlocks) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: block ${b} outside [0, ${l.nBlocks})`,
      );
    }
  }
}

/** A sequence's rows in a step and the cache blocks of its positions. */
export interface KvSequence {
  rowStart: number;
  rowCount: number;
  blockTable: Int32Array;
}

/** Checks every sequence of a step; returns the rows they span. */
export function checkSequences(
  op: string,
  l: KvLayout,
  sequences: readonly KvSequence[],
  positions: Int32Array,
): number {
  let rows = 0;
  for (const s of sequences) {
    checkDims(op, { rowStart: s.rowStart }, true);
    const own = positions.subarray(s.rowStart, s.rowStart + s.rowCount);
    checkPositions(op, l, s.blockTable, own, s.rowCount);
    rows = Math.max(rows, s.rowStart + s.rowCount);
  }
  return rows;
}
