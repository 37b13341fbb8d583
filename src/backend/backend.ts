/**
 * The few operations a decoder-only transformer needs, implemented once per device
 * (reference TypeScript, native CPU kernels, CUDA). Model code is written against this
 * interface only; it never sees pointers, streams or devices.
 *
 * Shapes: activations are f32 matrices of `rows` tokens x `cols` features. A step carries
 * a batch of tokens that may belong to several sequences at different positions, so every
 * op that depends on position takes them from the `StepLayout`; nothing keeps a "current
 * position". The KV cache is paged: a sequence owns a block table of cache blocks.
 */

import type { GgmlTypeInfo } from "../gguf/types.ts";
import type { KvCache, KvCacheSpec } from "./kv_cache.ts";

export {
  type KvCache,
  kvCacheBytes,
  type KvCacheSpec,
  kvCopyProblem,
  type KvDType,
  kvDTypeProblem,
  kvLayerBytes,
  type KvPoolSpec,
  kvRowBytes,
  type KvShape,
} from "./kv_cache.ts";
export { hadamardProblem, type KvRotation, kvRotation } from "./hadamard.ts";
export {
  type BandwidthProbe,
  bandwidthProbeOf,
  type DeviceMemory,
  deviceMemoryOf,
  type OpProfiler,
  opProfilerOf,
  type OpTime,
} from "./capabilities.ts";

/** Where a backend computes. */
export type DeviceKind = "reference" | "cpu" | "cuda";

/** A weight tensor resident on the backend, in its GGUF type: `rows` x `cols` (ne[1] x ne[0]). */
export interface Weight {
  readonly name: string;
  readonly type: GgmlTypeInfo;
  readonly rows: number;
  readonly cols: number;
}

/** An f32 activation matrix owned by the backend: `rows` tokens x `cols` features. */
export interface Activation {
  readonly rows: number;
  readonly cols: number;
}

/** The bytes of a weight as found in the GGUF, with its native address when mapped. */
export interface WeightSource {
  name: string;
  type: GgmlTypeInfo;
  rows: number;
  cols: number;
  bytes: Uint8Array;
  pointer: Deno.PointerObject;
  /**
   * The bytes are a copy made for this call (a slice of a tensor, for tensor parallelism)
   * and die after it: a backend that reads weights in place copies them first.
   */
  transient?: boolean;
}

/**
 * A stack of `experts` matrices of one shape, `rows` x `cols` each: a GGUF 3-D tensor
 * (ne = [cols, rows, experts]), the experts of a mixture-of-experts FFN.
 */
export interface ExpertWeight {
  readonly name: string;
  readonly type: GgmlTypeInfo;
  readonly experts: number;
  readonly rows: number;
  readonly cols: number;
}

/**
 * The bytes of an expert stack: `rows` rows of expert e start `expertStride` bytes after
 * those of expert e - 1 (the expert's size, or more when `rows` is a slice of its rows).
 */
export interface ExpertSource extends WeightSource {
  experts: number;
  expertStride: number;
}

/** The rows of a step that belong to one sequence. */
export interface SequenceSlice {
  /** First row of this sequence in the step's activations. */
  rowStart: number;
  /** Number of consecutive rows. */
  rowCount: number;
  /** Cache blocks of the sequence, in position order. */
  blockTable: Int32Array;
}

/** Which token goes where in one step. */
export interface StepLayout {
  /** Position of each row's token in its sequence. */
  positions: Int32Array;
  sequences: SequenceSlice[];
}

/**
 * What a step's output rows hold: the logits ("logits", one row of the vocabulary each),
 * or the final hidden state after the output norm ("hidden", the model's embedding width),
 * what embeddings and rank heads are pooled from.
 */
export type StepOutput = "logits" | "hidden";

/**
 * One step's tokens: which token goes where, and which rows' outputs come back. Its
 * integers (ids, positions, block tables, logit rows) are what changes between steps of
 * the same shape.
 */
export interface Step {
  ids: Int32Array;
  layout: StepLayout;
  /** Rows whose output is computed, in this order (none: the step only fills caches). */
  logitRows: Int32Array;
  /** What those rows give back; absent: logits. */
  output?: StepOutput;
}

export interface AttentionShape {
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  /** Softmax scale, usually 1/sqrt(headDim). */
  scale: number;
  /**
   * Sliding-window attention: a token at position p sees positions p - window + 1 .. p
   * only (llama.cpp's standard SWA mask). Absent or 0: every earlier position.
   */
  window?: number;
}

/**
 * How a family rotates q and k, as ggml's rope computes it: the pair (a, b) of head
 * features i turns by theta_i = freqScale * position * base^(-2i/headDim) / factor_i
 * (with `yarn`, by a mix of that and the unscaled angle, and scaled in magnitude).
 */
export interface RopeSpec {
  /** "neox" pairs feature i with i + headDim/2 (Qwen, Gemma); "norm" pairs 2i with 2i + 1 (Llama). */
  style: "neox" | "norm";
  base: number;
  /** Linear position scaling, 1/factor of `rope.scaling.factor` (1: none). */
  freqScale: number;
  /** headDim/2 f32 divisors of the angles (Llama 3.1's rope_freqs.weight); null: all 1. */
  freqFactors: Weight | null;
  /** YaRN's corrections (models/rope_scaling.ts makes them); null: a plain rotation. */
  yarn: RopeYarn | null;
}

/**
 * ggml's `rope_yarn` terms. Pair i's angle is interp * (1 - mix_i) + extrap * mix_i, where
 * extrap is the unscaled angle, interp = freqScale * extrap, and
 * mix_i = extFactor * (1 - clamp((i - low) / max(0.001, high - low), 0, 1)): the fast
 * pairs (below `low`) keep their extrapolated angle, the slow ones (above `high`) are
 * interpolated. Both cos and sin are multiplied by `mscale`.
 */
export interface RopeYarn {
  /** ggml's ext_factor: 1 for YaRN, 0 for no mix (then only `mscale` applies). */
  extFactor: number;
  /** The ramp's ends, in pairs: ggml_rope_yarn_corr_dims. */
  low: number;
  high: number;
  /** The magnitude of cos and sin: attn_factor * (1 + 0.1 ln(1 / freqScale)) for YaRN. */
  mscale: number;
}

/** Element types a collective reduces. */
export type ReduceDType = "f32" | "f16";

/**
 * The ranks a tensor-parallel model is split over, as the ops see them. src/tp implements
 * it: shared memory between processes on one host, NCCL between GPUs.
 */
export interface Collective {
  readonly rank: number;
  readonly size: number;
  /**
   * Sums `count` values at `address` over every rank, in place; every rank ends with the
   * same bits. `address` is host memory when `stream` is null, else device memory ordered
   * on that device stream (the call then only enqueues the reduction).
   */
  allReduceSum(address: bigint, count: number, dtype: ReduceDType, stream: Deno.PointerValue): void;
}

/**
 * Lets a step stop early: it stops once `word[0]` (shared memory) differs from `seen`,
 * which another thread changes when something more urgent arrived.
 */
export interface StepInterrupt {
  word: Int32Array;
  seen: number;
}

/**
 * The ops every backend offers. Ops may be queued (a CUDA stream, the CPU's op list) and
 * run when something reads a result back; `synchronize` runs what is queued.
 */
export interface Backend {
  readonly kind: DeviceKind;

  /** Makes a GGUF tensor usable by the ops (in place on CPU, a copy on a GPU). */
  loadWeight(source: WeightSource): Weight;

  /** Makes a GGUF stack of expert matrices usable by matmulExperts, as loadWeight does. */
  loadExperts(source: ExpertSource): ExpertWeight;

  /** A new activation matrix (contents undefined). */
  activation(rows: number, cols: number): Activation;

  /** A view of the first `rows` rows of `a` (no copy). */
  rowsOf(a: Activation, rows: number): Activation;

  /** Releases an activation made by `activation()` (not a view). */
  free(a: Activation): void;

  createKvCache(spec: KvCacheSpec): KvCache;

  /**
   * Copies positions [0, rows) of cache block `from` into block `to`, K and V of every
   * layer: a prefix shared up to the middle of a block.
   */
  copyKvRows(cache: KvCache, from: number, to: number, rows: number): void;

  /**
   * Issues the ops of one step: `ops` makes the model's calls for `step`, whose K/V go to
   * `cache`. The ops may depend on the step's integers only through the arrays of `step`
   * they pass to the ops, and otherwise only on the step's shape (rows per sequence, table
   * lengths, logit rows), `cache` and memory allocated from this backend. A backend whose
   * cost of issuing ops is worth saving (the CPU's op list) may then skip `ops` and issue
   * again what an earlier step of the same shape issued, with this step's integers.
   */
  runStep(step: Step, cache: KvCache, ops: () => void): void;

  /** out[i] = table[ids[i]] (dequantized). */
  embed(out: Activation, table: Weight, ids: Int32Array): void;

  /**
   * Root-mean-square normalisation of every `dim`-long group of `x` (a token's features,
   * or one head of it), scaled by `weight` (length `dim`). `out` may be `x`.
   */
  rmsNorm(out: Activation, x: Activation, weight: Weight, dim: number, eps: number): void;

  /** out = x · Wᵀ: every row of x (cols = W.cols) becomes a row of out (cols = W.rows). */
  matmul(out: Activation, w: Weight, x: Activation): void;

  /**
   * outs[i] = x · ws[i]ᵀ for weights of one width that read the same x (Q, K and V; gate
   * and up): one call, so that a backend can share work and synchronization between them.
   */
  matmulMany(outs: Activation[], ws: Weight[], x: Activation): void;

  /** Rotary embedding, in place on every head of every row at its position. */
  rope(x: Activation, layout: StepLayout, nHeads: number, headDim: number, spec: RopeSpec): void;

  /**
   * Rotates every `n` consecutive values of every row of `a`, in place, by the orthonormal
   * Walsh-Hadamard matrix of order n (a power of two): H[i][j] = (-1)^popcount(i & j) /
   * sqrt(n). H is its own inverse, so rotating twice gives the values back (kvRotation).
   */
  hadamard(a: Activation, n: number): void;

  /** Writes each row's K and V into the cache slot of its position. */
  storeKv(cache: KvCache, layer: number, k: Activation, v: Activation, layout: StepLayout): void;

  /** Causal attention of each row's queries over its sequence's cache (GQA). */
  attention(
    out: Activation,
    q: Activation,
    cache: KvCache,
    layer: number,
    layout: StepLayout,
    shape: AttentionShape,
  ): void;

  /** out = silu(gate) * up, element-wise. `out` may be `gate`. */
  siluMul(out: Activation, gate: Activation, up: Activation): void;

  /**
   * out = gelu(gate) * up, element-wise, GELU in its tanh approximation (ggml's gelu).
   * `out` may be `gate`.
   */
  geluMul(out: Activation, gate: Activation, up: Activation): void;

  /** out = a + bias on every row (bias: one f32 row of a's width). `out` may be `a`. */
  addBias(out: Activation, a: Activation, bias: Weight): void;

  /** out = a * factor, element-wise. `out` may be `a`. */
  scale(out: Activation, a: Activation, factor: number): void;

  /** out = a + b, element-wise. `out` may be `a`. */
  add(out: Activation, a: Activation, b: Activation): void;

  /**
   * Mixture-of-experts routing as llama.cpp computes it (build_moe_ffn with softmax gating):
   * each row of `logits` (one score per expert) becomes p = softmax(row); the k = ids.cols
   * experts of highest p are chosen, in the order ggml's descending argsort leaves them
   * (libstdc++'s std::sort, ties included); ids gets their indices (as f32 integers) and
   * weights their p, divided by the sum of the k when `normalize` (the sum clamped to at
   * least 2^-14). All in f32 but the softmax's sum, which is f64.
   */
  routeExperts(ids: Activation, weights: Activation, logits: Activation, normalize: boolean): void;

  /**
   * outs[m] row t·k + j = ws[m][ids[t][j]] · (x row t when x has a row per token, else x row
   * t·k + j), for expert stacks of one width that read the same x (gate and up): each chosen
   * expert's weights are read once for all the rows that chose it.
   */
  matmulExperts(outs: Activation[], ws: ExpertWeight[], x: Activation, ids: Activation): void;

  /**
   * out[t] = w[t][0]·e[t·k] + w[t][1]·e[t·k + 1] + ... in f32, products first, summed in
   * that order (llama.cpp's): `experts` has k rows per row of `out`, `weights` k columns.
   */
  combineExperts(out: Activation, experts: Activation, weights: Activation): void;

  /** Copies rows of `a` into `out` (out[i] = a[rows[i]]): selects the rows that need logits. */
  gatherRows(out: Activation, a: Activation, rows: Int32Array): void;

  /**
   * Sums `a` over every rank of `group`, in place: the partial products of a matrix split
   * by input columns under tensor parallelism.
   */
  allReduce(a: Activation, group: Collective): void;

  /**
   * Returns once every op issued so far has run: a step that reads nothing back calls it,
   * so the step has really run when it returns (its timing sizes the next steps; ranks
   * stay in lockstep). A backend that can stop between ops honours `interrupt`: it returns
   * false when it stopped, and whatever the step would have written (its cache rows
   * included) is then left half done, to be computed again. Others run whole, return true.
   */
  synchronize(interrupt?: StepInterrupt): boolean;

  /**
   * The index of the largest value of each row, computed where the data lives: greedy
   * decoding then copies back one integer per row instead of a whole row of logits. Runs
   * what is queued first, in the same submission where the backend can (the CPU's op
   * list, the GPU's stream). With `masks` (one per row), row r picks among the columns its
   * bitset allows (bit i of word i >>> 5: column i; at least ceil(cols / 32) words), or
   * among all of them where its mask is null: greedy decoding under a constraint. Ties go
   * to the lowest index either way. A row whose bitset allows nothing is the caller's
   * mistake; its answer is then unspecified.
   */
  argmaxRows(a: Activation, masks?: readonly (Uint32Array | null)[]): Int32Array;

  /**
   * Reads an activation back to the host: into a new array, or into the first rows × cols
   * values of `into` (an off-heap array, `new Float32Array(new ArrayBuffer(n))`), which
   * comes back as that subarray. A step's rows read into the same array every step spare
   * the host a fresh allocation per step, whose first touch costs a page fault per 4 KiB.
   */
  read(a: Activation, into?: Float32Array): Float32Array;

  /** Releases everything the backend holds. */
  close(): void;
}

/** Backend.read for values already on the host: a copy, or `into` filled with them. */
export function readHostValues(values: Float32Array, into?: Float32Array): Float32Array {
  if (into === undefined) return values.slice();
  const out = readTarget(into, values.length);
  out.set(values);
  return out;
}

/** The first `n` values of `into`, where Backend.read writes an activation of n values. */
export function readTarget(into: Float32Array, n: number): Float32Array {
  if (into.length < n) {
    throw new RangeError(`read: ${n} values do not fit an array of ${into.length}`);
  }
  return into.subarray(0, n);
}
