/** The paged KV cache's layout as the kernels see it, and the checks of its operands. */

import { type KvDType, kvLayerBytes } from "../backend.ts";
import { CpuKernelError } from "./errors.ts";

/** KV cache element types (ggml ids). */
export const KV_F32 = 0;
export const KV_F16 = 1;
export const KV_Q4_0 = 2;
export const KV_Q8_0 = 8;
export type KvType = typeof KV_F32 | typeof KV_F16 | typeof KV_Q4_0 | typeof KV_Q8_0;

const KV_TYPE_IDS: Record<KvDType, KvType> = {
  f32: KV_F32,
  f16: KV_F16,
  q8_0: KV_Q8_0,
  q4_0: KV_Q4_0,
};

/** The kernels' id of a cache element type. */
export function kvTypeId(dtype: KvDType): KvType {
  return KV_TYPE_IDS[dtype];
}

function kvDType(type: KvType): KvDType {
  return (Object.keys(KV_TYPE_IDS) as KvDType[]).find((k) => KV_TYPE_IDS[k] === type)!;
}

/** The paged KV cache of one layer: K and V are [nBlocks][blockSize][nKvHeads][headDim]. */
export interface KvLayout {
  type: KvType;
  nBlocks: number;
  blockSize: number;
  nKvHeads: number;
  headDim: number;
}

/** Bytes of one of K or V for a layer with this layout. */
export function kvLayoutBytes(l: KvLayout): number {
  return kvLayerBytes({ ...l, dtype: kvDType(l.type) });
}

/** Why `v` is not a count (a non-negative integer, positive unless allowZero), or null. */
function notCount(name: string, v: number, allowZero: boolean): string | null {
  return Number.isSafeInteger(v) && v >= 0 && (allowZero || v > 0)
    ? null
    : `${name} must be a positive integer, got ${v}`;
}

/**
 * Positions [start, start + n) and the block table of a kv_store or attention call, before
 * anything runs. Written without allocations: a replayed decode step runs it again on
 * every token (step_template.ts).
 */
export function checkPositions(
  op: string,
  l: KvLayout,
  blockTable: Int32Array,
  positions: Int32Array,
  start: number,
  n: number,
): void {
  const bad = notCount("nTokens", n, false) ?? notCount("rowStart", start, true);
  if (bad !== null) throw new CpuKernelError("cpu_kernel_invalid", `${op}: ${bad}`);
  if (positions.length < start + n) {
    throw new CpuKernelError(
      "cpu_kernel_invalid",
      `${op}: ${positions.length - start} positions for ${n} tokens`,
    );
  }
  for (let t = start; t < start + n; t++) {
    const p = positions[t];
    if (p < 0 || Math.floor(p / l.blockSize) >= blockTable.length) {
      throw new CpuKernelError(
        "cpu_kernel_invalid",
        `${op}: position ${p} outside the block table`,
      );
    }
  }
  for (let i = 0; i < blockTable.length; i++) {
    const b = blockTable[i];
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
  for (let i = 0; i < sequences.length; i++) {
    const s = sequences[i];
    checkPositions(op, l, s.blockTable, positions, s.rowStart, s.rowCount);
    rows = Math.max(rows, s.rowStart + s.rowCount);
  }
  return rows;
}
