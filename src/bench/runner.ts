/**
 * llama-bench's two measurements on one model: pp N (an N-token prompt evaluated in one
 * batch, logits for its last token) and tg N (N tokens generated one at a time), each
 * repeated after a warm-up, after `depth` positions already in the cache (llama-bench's
 * -d), plus the memory bandwidth of the same device measured in the same run, so decode
 * efficiency is a ratio of two figures taken side by side.
 */

import { type Backend, kvCacheBytes, type KvDType, type Step } from "../backend/backend.ts";
import { architecture, optionalNumber } from "../gguf/mod.ts";
import type { GgufModel } from "../models/family.ts";
import { ModelInstance } from "../models/instance.ts";
import { StepRows } from "../engine/mod.ts";

export interface Measurement {
  test: string;
  /** Tokens per second of each repetition. */
  samples: number[];
}

export function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function stddev(xs: number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

/** A deterministic stream of token ids in [0, vocab). */
function tokens(n: number, vocab: number, seed: number): Int32Array {
  let s = seed >>> 0;
  return Int32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % vocab;
  });
}

/** Positions filled per forward when the cache is brought to a depth. */
const FILL_CHUNK = 512;

export class ModelBench {
  readonly #table: Int32Array;
  readonly #rows = new StepRows();
  /** Positions [0, depth) of the cache hold a prompt: pp and tg run after them. */
  #depth = 0;

  private constructor(
    readonly model: GgufModel,
    readonly instance: ModelInstance,
    readonly maxTokens: number,
    readonly kvType: KvDType,
    blocks: number,
  ) {
    this.#table = Int32Array.from({ length: blocks }, (_, i) => i);
  }

  /** Binds `model` to `backend` with a KV cache of `maxTokens` positions of `kvType`. */
  static load(
    model: GgufModel,
    backend: Backend,
    maxTokens: number,
    kvType: KvDType = "f16",
  ): ModelBench {
    const blockSize = 16;
    const nBlocks = Math.ceil(maxTokens / blockSize);
    const instance = ModelInstance.create(model, backend, { blockSize, nBlocks, dtype: kvType });
    return new ModelBench(model, instance, maxTokens, kvType, nBlocks);
  }

  get depth(): number {
    return this.#depth;
  }

  /**
   * Fills the cache up to `depth` positions (from where it stands, in chunks), so that
   * what runs next attends to them. Going back is free: the positions stay written.
   */
  fill(depth: number): void {
    if (depth > this.maxTokens) throw new RangeError(`depth ${depth} > ${this.maxTokens}`);
    for (let p = Math.min(this.#depth, depth); p < depth; p += FILL_CHUNK) {
      const n = Math.min(FILL_CHUNK, depth - p);
      this.instance.forward(this.#step(tokens(n, this.model.shape.vocabSize, p + 7), p));
    }
    this.#depth = Math.max(this.#depth, depth);
  }

  /** `ids` at positions start.., with the last row's logits asked for (or every row's). */
  #step(ids: Int32Array, start: number, allLogits = false): Step {
    return {
      ids,
      layout: {
        positions: Int32Array.from(ids, (_, i) => start + i),
        sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: this.#table }],
      },
      logitRows: allLogits ? Int32Array.from(ids, (_, i) => i) : Int32Array.of(ids.length - 1),
    };
  }

  /**
   * Seconds of one speculative verification of k drafted tokens at `depth` (filled first):
   * k + 1 rows in one step, every row's logits computed, as the engine verifies. They are
   * read back into a kept array, as the engine reads them (what sampled speculation needs),
   * or with `greedy` only each row's argmax is, taken where the logits are (the engine's
   * way at temperature 0). k = 0 is a plain decode step through the same path.
   */
  verify(k: number, seed: number, depth = 0, greedy = false): number {
    this.fill(depth);
    const ids = tokens(k + 1, this.model.shape.vocabSize, seed);
    const t0 = performance.now();
    const step = this.#step(ids, depth, true);
    if (greedy) {
      this.instance.forwardArgmax(step);
    } else {
      this.instance.forward(
        step,
        undefined,
        this.#rows.target(ids.length * this.model.shape.vocabSize),
      );
    }
    return (performance.now() - t0) / 1000;
  }

  /** Seconds to evaluate an n-token prompt in one batch at `depth` (filled first). */
  prompt(n: number, seed: number, depth = 0): number {
    this.fill(depth);
    const ids = tokens(n, this.model.shape.vocabSize, seed);
    const t0 = performance.now();
    this.instance.forward(this.#step(ids, depth));
    return (performance.now() - t0) / 1000;
  }

  /**
   * Seconds to generate n tokens one at a time after `depth` positions (filled first),
   * greedily, the argmax taken where the logits are, as the engine does.
   */
  generate(n: number, seed: number, depth = 0): number {
    this.fill(depth);
    let next = tokens(1, this.model.shape.vocabSize, seed)[0];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      next = this.instance.forwardArgmax(this.#step(Int32Array.of(next), depth + i))![0];
    }
    return (performance.now() - t0) / 1000;
  }

  /**
   * Bytes a decode step reads: every weight once (the token embedding only as the tied
   * output matrix, a lookup reads one row; of a stack of experts, the share a token is
   * routed to) plus the K/V of `context` positions in the bench's cache type.
   */
  bytesPerToken(context: number): number {
    const file = this.model.file;
    const tied = file.tensor("output.weight") === undefined;
    const arch = architecture(file);
    const count = optionalNumber(file, `${arch}.expert_count`) ?? 1;
    const used = optionalNumber(file, `${arch}.expert_used_count`) ?? 1;
    let bytes = 0;
    for (const t of file.tensors) {
      if (t.name === "token_embd.weight" && !tied) continue;
      bytes += t.ne.length === 3 && t.ne[2] === count ? (t.nBytes * used) / count : t.nBytes;
    }
    return bytes +
      kvCacheBytes({ ...this.model.shape, blockSize: 1, nBlocks: context, dtype: this.kvType });
  }

  close(): void {
    this.instance.close();
  }
}
