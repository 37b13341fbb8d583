/**
 * Turns a row of logits into the next token. The chain, in the order vLLM and Hugging Face
 * apply it: logit bias, repetition penalty (prompt and output tokens), presence and
 * frequency penalties (output tokens), temperature, top-k, top-p, min-p, then a draw
 * from the seeded RNG; a constraint's filter goes before all of them. Temperature 0 is
 * greedy. Log-probs are those of the model's raw distribution (before any of the above),
 * as OpenAI reports them.
 */

import { argmax } from "../common/argmax.ts";
import { Rng } from "../gguf/rng.ts";
import type { TokenFilter } from "./token_filter.ts";
import { expNeg } from "./exp_table.ts";
import { draw, type DrawParams, sum4 } from "./truncation.ts";
import { nativeSampling, packDraw, type RowSummary } from "./native_sampling.ts";

export interface SamplingParams {
  /** 0 = greedy. */
  temperature: number;
  /** 0 = off. */
  topK: number;
  /** 1 = off. */
  topP: number;
  /** 0 = off. */
  minP: number;
  /** 1 = off; > 1 discourages tokens already in the prompt or output. */
  repetitionPenalty: number;
  /** Subtracted once from the logit of every token already generated. */
  presencePenalty: number;
  /** Subtracted from a token's logit once per time it was generated. */
  frequencyPenalty: number;
  /** Added to the logits of the given token ids. */
  logitBias?: ReadonlyMap<number, number>;
  /** Same seed, same prompt, same params: same tokens. Absent: a random seed. */
  seed?: number;
  /** Log-probs of this many most likely alternatives per step (0 = none). */
  topLogprobs: number;
  /** Whether to report the chosen token's log-prob. */
  logprobs: boolean;
}

export const GREEDY: SamplingParams = {
  temperature: 0,
  topK: 0,
  topP: 1,
  minP: 0,
  repetitionPenalty: 1,
  presencePenalty: 0,
  frequencyPenalty: 0,
  topLogprobs: 0,
  logprobs: false,
};

export interface TokenLogprob {
  id: number;
  logprob: number;
}

export interface SampledToken {
  id: number;
  /** Present when `logprobs` or `topLogprobs` was asked for. */
  logprob?: number;
  top?: TokenLogprob[];
}

/** Candidates below max - CUTOFF (in tempered logits) carry < e^-30 of the mass each. */
const CUTOFF = 30;

/** Folds an arbitrary (possibly huge or negative) integer seed into 32 bits. */
function seed32(seed: number): number {
  const lo = Number(BigInt.asUintN(32, BigInt(Math.trunc(seed))));
  const hi = Number(BigInt.asUintN(32, BigInt(Math.trunc(seed)) >> 32n));
  return (lo ^ Math.imul(hi, 0x9e3779b1)) >>> 0;
}

/**
 * The RNG seed of choice `stream` of a request (n > 1): choice 0 draws as a request of one
 * choice does, the others from streams of their own, all fixed by the request's seed.
 */
function streamSeed(seed: number, stream: number): number {
  if (stream === 0) return seed;
  let h = Math.imul(seed ^ Math.imul(stream, 0x85ebca6b), 0xc2b2ae35) >>> 0;
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0;
  return (h ^ (h >>> 12)) >>> 0;
}

export class Sampler {
  readonly #params: SamplingParams;
  readonly #rng: Rng;
  readonly #scratch: Float32Array;
  /** Output-token counts (presence/frequency) and every token seen (repetition). */
  readonly #generated = new Map<number, number>();
  readonly #seen = new Set<number>();
  /** A draw made ahead (drawAhead), for the next `sample` to report. */
  #drawn: number | undefined;

  constructor(
    params: SamplingParams,
    vocabSize: number,
    promptIds: ArrayLike<number> = [],
    /** Which choice of its request this sampler draws for (its own RNG stream). */
    stream = 0,
  ) {
    this.#params = params;
    const seed = seed32(params.seed ?? Math.floor(Math.random() * 2 ** 32));
    this.#rng = new Rng(streamSeed(seed, stream));
    this.#scratch = new Float32Array(vocabSize);
    for (let i = 0; i < promptIds.length; i++) this.#seen.add(promptIds[i]);
  }

  /** Greedy with nothing to report and nothing to adjust: the argmax alone decides. */
  get plainGreedy(): boolean {
    const p = this.#params;
    return p.temperature <= 0 && !p.logprobs && p.topLogprobs === 0 && !this.#adjusts;
  }

  /** A draw at a temperature from the logits as they come, nothing adjusted first. */
  get plainSampled(): boolean {
    return this.#params.temperature > 0 && !this.#adjusts;
  }

  /** Whether a logit bias or a penalty changes the logits before the choice. */
  get #adjusts(): boolean {
    const p = this.#params;
    return (p.logitBias !== undefined && p.logitBias.size > 0) || p.repetitionPenalty !== 1 ||
      p.presencePenalty !== 0 || p.frequencyPenalty !== 0;
  }

  /** This sampler's next draw, its `u` taken from the stream. */
  #drawParams(): DrawParams {
    const p = this.#params;
    return {
      temperature: p.temperature,
      cutoff: CUTOFF,
      topK: p.topK,
      topP: p.topP,
      minP: p.minP,
      u: this.#rng.float(),
    };
  }

  /** Records a token that became part of the output (penalties see it from now on). */
  accept(id: number): void {
    this.#generated.set(id, (this.#generated.get(id) ?? 0) + 1);
    this.#seen.add(id);
  }

  /**
   * Chooses the next token from `logits` (left untouched); null when `filter` allows no
   * token at all.
   */
  sample(logits: Float32Array): SampledToken;
  sample(logits: Float32Array, filter: TokenFilter | undefined): SampledToken | null;
  sample(logits: Float32Array, filter?: TokenFilter): SampledToken | null {
    const p = this.#params;
    if (this.#drawn !== undefined) {
      const id = this.#drawn;
      this.#drawn = undefined;
      return this.#reported(logits, id >= 0 ? id : 0);
    }
    let x = this.#scratch;
    if (filter !== undefined) {
      if (!filter.restrict(x, logits)) return null;
      this.#applyBiasAndPenalties(x);
    } else if (this.#adjusts) {
      x.set(logits.subarray(0, x.length));
      this.#applyBiasAndPenalties(x);
    } else {
      // Nothing to change: the draw reads the logits where they are.
      x = logits.subarray(0, x.length);
    }

    const id = p.temperature <= 0 ? argmax(x) : this.#draw(x);
    return this.#reported(logits, id);
  }

  /**
   * A plainSampled sampler's next draw done elsewhere (the engine draws a step's rows
   * together, runner.drawRows): its parameters, `u` taken from this sampler's stream now, at
   * into[6 at, 6 at + 6). The next `sample` then reports `drawn(id)`'s token instead of
   * drawing, so the stream moves once per token either way.
   */
  drawAhead(into: Float64Array, at: number): void {
    packDraw(this.#drawParams(), into, at);
  }

  /** The token the draw that drawAhead set up gave (-1: no candidate). */
  drawn(id: number): void {
    this.#drawn = id;
  }

  #reported(logits: Float32Array, id: number): SampledToken {
    const p = this.#params;
    return p.logprobs || p.topLogprobs > 0 ? tokenLogprobs(logits, id, p.topLogprobs) : { id };
  }

  #applyBiasAndPenalties(x: Float32Array): void {
    const p = this.#params;
    if (p.logitBias) {
      for (const [id, bias] of p.logitBias) if (id >= 0 && id < x.length) x[id] += bias;
    }
    if (p.repetitionPenalty !== 1) {
      for (const id of this.#seen) {
        if (id < 0 || id >= x.length) continue;
        x[id] = x[id] > 0 ? x[id] / p.repetitionPenalty : x[id] * p.repetitionPenalty;
      }
    }
    if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
      for (const [id, count] of this.#generated) {
        if (id < 0 || id >= x.length) continue;
        x[id] -= p.presencePenalty + p.frequencyPenalty * count;
      }
    }
  }

  /**
   * Temperature, truncation (top-k, top-p, min-p), then a draw: in the CPU kernel library
   * where it loads, else in truncation.ts, the same token either way.
   */
  #draw(x: Float32Array): number {
    const params = this.#drawParams();
    const native = nativeSampling();
    const id = native ? native.draw(x, params) : draw(x, params);
    // Every logit NaN: the token greedy decoding picks.
    return id >= 0 ? id : 0;
  }
}

/** The `k` indices with the largest values, best first (ties: lower index first). */
export function topIds(x: ArrayLike<number>, k: number): number[] {
  const top: number[] = [];
  for (let i = 0; i < x.length; i++) {
    if (top.length === k && x[i] <= x[top[k - 1]]) continue;
    let j = top.length < k ? top.length : k - 1;
    top[j] = i;
    while (j > 0 && x[top[j - 1]] < x[top[j]]) {
      [top[j - 1], top[j]] = [top[j], top[j - 1]];
      j--;
    }
  }
  return top;
}

/**
 * Token `id` with its log-prob under `logits` and the `top` most likely alternatives: in the
 * CPU kernel library where it loads, else here, the same to the bit either way.
 */
export function tokenLogprobs(logits: Float32Array, id: number, top: number): SampledToken {
  const native = nativeSampling();
  const s = native ? native.summary(logits, top) : rowSummary(logits, top);
  const logZ = s.max + Math.log(s.sum);
  const out: SampledToken = { id, logprob: logits[id] - logZ };
  if (top > 0) out.top = Array.from(s.top, (t) => ({ id: t, logprob: logits[t] - logZ }));
  return out;
}

/** rowSummary's exponentials, kept between rows (sampling runs one row at a time). */
let exps = new Float64Array(0);

/**
 * The largest logit (NaN skipped), the sum of e^-(max - logit) in sum4's order (as
 * kernels/cpu/sample.c adds them), and the `top` best ids.
 */
export function rowSummary(x: Float32Array, top: number): RowSummary {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
  if (exps.length < x.length) exps = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) exps[i] = expNeg(max - x[i]);
  const sum = sum4(exps, x.length);
  const ids = top > 0 ? Int32Array.from(topIds(x, top)) : new Int32Array(0);
  return { max, sum, top: ids };
}
