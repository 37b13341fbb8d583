import { kvCacheBytes, type KvDType, type KvShape } from "../../backend/backend.ts";

/**
 * Blocks of `blockSize` positions in the KV pool: as many as `budgetBytes` holds, and never
 * fewer than one whole context, so that a request that fits the context can always run,
 * even alone after preempting everyone else.
 */
export function kvPoolBlocks(
  shape: KvShape,
  contextLength: number,
  budgetBytes: number,
  dtype: KvDType,
  blockSize: number,
): number {
  const blockBytes = kvCacheBytes({ ...shape, blockSize, nBlocks: 1, dtype });
  return Math.max(Math.ceil(contextLength / blockSize), Math.floor(budgetBytes / blockBytes));
}
