/**
 * llama-bench's two measurements on one model: pp N (an N-token prompt evaluated in one
 * batch, logits for its last token) and tg N (N tokens generated one at a time from an
 * empty context), each repeated after a warm-up, plus the memory bandwidth of the same
 * device measured in the same run, so decode efficiency is a ratio of two figures taken
 * side by side.
 */

import type { Activation, Backend, KvCache } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/mod.ts";
import { Qwen3Model } from "../models/qwen3.ts";
import { argmax } from "../engine/sampler.ts";

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

export class ModelBench {
  readonly #cache: KvCache;
  readonly #table: Int32Array;

  constructor(readonly model: Qwen3Model, readonly backend: Backend, readonly maxTokens: number) {
    const hp = model.hparams;
    const blockSize = 16;
    const nBlocks = Math.ceil(maxTokens / blockSize);
    this.#cache = backend.createKvCache({
      nLayers: hp.nLayers,
      nKvHeads: hp.nKvHeads,
      headDim: hp.headDim,
      blockSize,
      nBlocks,
      dtype: "f16",
    });
    this.#table = Int32Array.from({ length: nBlocks }, (_, i) => i);
  }

  static load(file: GgufFile, backend: Backend, maxTokens: number): ModelBench {
    return new ModelBench(Qwen3Model.load(file, backend), backend, maxTokens);
  }

  /** Runs `ids` at positions start.. and returns the last row's logits, on the device. */
  #logits(ids: Int32Array, start: number): Activation {
    const layout = {
      positions: Int32Array.from(ids, (_, i) => start + i),
      sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: this.#table }],
    };
    return this.model.forward(ids, layout, this.#cache, Int32Array.of(ids.length - 1));
  }

  /** Seconds to evaluate an n-token prompt in one batch. */
  prompt(n: number, seed: number): number {
    const ids = tokens(n, this.model.hparams.vocabSize, seed);
    const t0 = performance.now();
    this.backend.read(this.#logits(ids, 0));
    return (performance.now() - t0) / 1000;
  }

  /**
   * Seconds to generate n tokens one at a time from an empty context, greedily (on a GPU
   * the argmax is taken on the device, as the engine does).
   */
  generate(n: number, seed: number): number {
    let next = tokens(1, this.model.hparams.vocabSize, seed)[0];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const logits = this.#logits(Int32Array.of(next), i);
      next = this.backend.argmaxRows?.(logits)[0] ?? argmax(this.backend.read(logits));
    }
    return (performance.now() - t0) / 1000;
  }

  /** Runs `fn` once to warm up, then `reps` times; returns tokens/s per repetition. */
  measure(
    test: string,
    n: number,
    reps: number,
    fn: (n: number, seed: number) => number,
    afterEach?: () => void,
  ): Measurement {
    fn(Math.min(n, 16), 0);
    const samples = Array.from({ length: reps }, (_, r) => {
      const rate = n / fn(n, r + 1);
      afterEach?.();
      return rate;
    });
    return { test, samples };
  }

  /**
   * Bytes a decode step reads: every weight once (the token embedding only as the tied
   * output matrix, a lookup reads one row) plus the K/V of `context` positions.
   */
  bytesPerToken(file: GgufFile, context: number): number {
    const hp = this.model.hparams;
    let bytes = 0;
    for (const t of file.tensors) {
      if (t.name === "token_embd.weight" && !hp.tiedOutput) continue;
      bytes += t.nBytes;
    }
    const kv = 2 * hp.nLayers * hp.nKvHeads * hp.headDim * 2 * context;
    return bytes + kv;
  }

  close(): void {
    this.model.close();
  }
}
