/**
 * The paged K/V cache every backend keeps: its element types, geometry and byte sizes, and
 * the checks a backend runs before touching one.
 */

/**
 * A KV cache element type. q8_0 and q4_0 are ggml's blocks of 32 values (an f16 scale and
 * 32 int8, or 32 4-bit values): 34 and 18 bytes, so each head's row must be whole blocks.
 */
export type KvDType = "f32" | "f16" | "q8_0" | "q4_0";

/** Bytes per 32 values of each KV type. */
const KV_BYTES_PER_32: Record<KvDType, number> = { f32: 128, f16: 64, q8_0: 34, q4_0: 18 };

/** Why a cache of `dtype` cannot hold heads of `headDim` values, or null. */
export function kvDTypeProblem(dtype: KvDType, headDim: number): string | null {
  if (!(dtype in KV_BYTES_PER_32)) return `unknown KV cache type "${dtype}"`;
  if ((dtype === "q8_0" || dtype === "q4_0") && headDim % 32 !== 0) {
    return `a ${dtype} KV cache needs a head dimension divisible by 32, got ${headDim}`;
  }
  return null;
}

/** How a KV cache pool is laid out; its per-layer shape comes from the model. */
export interface KvPoolSpec {
  /** Tokens per cache block. */
  blockSize: number;
  /** Blocks in the pool (shared by every sequence of the model). */
  nBlocks: number;
  dtype: KvDType;
}

/** The K/V geometry of a model, or of one rank's share of it. */
export interface KvShape {
  nLayers: number;
  nKvHeads: number;
  headDim: number;
}

export type KvCacheSpec = KvShape & KvPoolSpec;

/** A paged K/V cache pool: per layer, `[nBlocks][blockSize][nKvHeads][headDim]` for K and V. */
export interface KvCache {
  readonly spec: KvCacheSpec;
  /** Bytes held by the pool. */
  readonly bytes: number;
}

/** Bytes of one position of one layer's K (or V) in a cache of `spec`. */
export function kvRowBytes(spec: Pick<KvCacheSpec, "nKvHeads" | "headDim" | "dtype">): number {
  return spec.nKvHeads * spec.headDim * KV_BYTES_PER_32[spec.dtype] / 32;
}

/** Bytes of one layer's K (or V) in a cache of `spec`: every block. */
export function kvLayerBytes(spec: Omit<KvCacheSpec, "nLayers">): number {
  return spec.nBlocks * spec.blockSize * kvRowBytes(spec);
}

/** Bytes of a whole cache of `spec`: K and V of every layer. */
export function kvCacheBytes(spec: KvCacheSpec): number {
  return 2 * spec.nLayers * kvLayerBytes(spec);
}

/** What is wrong with a `copyKvRows` call on a cache of `spec`; null when nothing is. */
export function kvCopyProblem(
  spec: KvCacheSpec,
  from: number,
  to: number,
  rows: number,
): string | null {
  const ok = (b: number) => Number.isInteger(b) && b >= 0 && b < spec.nBlocks;
  if (ok(from) && ok(to) && Number.isInteger(rows) && rows >= 0 && rows <= spec.blockSize) {
    return null;
  }
  return `${rows} rows of block ${from} to ${to} (${spec.nBlocks} blocks of ${spec.blockSize})`;
}
