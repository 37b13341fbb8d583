/**
 * One request inside the engine core: its tokens, its place in the KV cache, its sampler,
 * what its steps' output rows are for (sampling, scoring its prompt, pooling), and when it
 * ends (a stop token, its token budget, or its observer's say).
 */

import { NeuronError } from "../common/errors.ts";
import type { Pooling } from "../models/pooling.ts";
import type {
  EngineFinish,
  EngineRequest,
  SequenceObserver,
  TokenCounts,
  TokenEnd,
} from "./request.ts";
import type { TokenFilter } from "./token_filter.ts";
import { type SampledToken, Sampler, tokenLogprobs } from "./sampler.ts";
import { Speculation, type SpeculativeParams } from "./spec/speculation.ts";

/** Prompt positions a step scores at most for one sequence: each costs a row of logits. */
export const PROMPT_SCORING_CHUNK = 64;

export class Sequence {
  readonly id: string;
  /** Prompt then generated tokens: everything this sequence's cache positions hold. */
  readonly tokens: number[];
  readonly promptLength: number;
  readonly maxNew: number;
  readonly sampler: Sampler;
  /** Raw top logits to report per step (0 = none). */
  readonly topLogits: number;
  /** The constraint on its tokens, if any (structured output). */
  readonly filter: TokenFilter | undefined;
  /** How the prompt's hidden states are pooled; null: the sequence generates. */
  readonly pooling: Pooling | null;
  /** Alternatives per scored prompt token; -1: the prompt is not scored. */
  readonly promptTop: number;
  /** Leading tokens whose K/V are in the cache. */
  cached = 0;
  /** Cache blocks, in position order. */
  blocks: number[] = [];
  /** Content keys of the leading full blocks already registered for prefix reuse. */
  keys: string[] = [];
  /** Prompt tokens served from the prefix cache at first admission. */
  reusedTokens = -1;
  /**
   * How much of the prompt a later request may reuse to the token (the block it ends in is
   * registered by its first tokens too): see EngineRequest.reuseBoundary.
   */
  readonly reuseBoundary: number;
  /** The other choices of its request, forked from it once its prompt has run. */
  followers: Sequence[] = [];
  /** Its prompt's scores once reported (the choices forked from it report the same). */
  promptScores: SampledToken[] = [];
  generated = 0;
  finished = false;
  /** Where its drafts come from; null: it decodes one token per step. */
  readonly speculation: Speculation | null;
  /** Tokens drafted for its next decode run (the engine sets them before each step). */
  draft: number[] = [];

  readonly #stopIds: ReadonlySet<number>;
  readonly #observer: SequenceObserver;
  /** Scored prompt tokens by position - 1, until reported. */
  #scored: SampledToken[] = [];
  #promptReported = false;
  /** Pooled rows so far (a sum for mean pooling), and how many. */
  #pool: Float64Array | null = null;
  #pooledRows = 0;

  constructor(
    request: EngineRequest,
    maxNew: number,
    vocabSize: number,
    observer: SequenceObserver,
    /** Which choice of its request this is (its sampler's stream). */
    choice = 0,
    speculative?: SpeculativeParams,
  ) {
    this.id = request.id;
    this.tokens = Array.from(request.prompt);
    this.promptLength = request.prompt.length;
    this.reuseBoundary = Math.min(request.reuseBoundary ?? Infinity, request.prompt.length);
    this.maxNew = maxNew;
    this.topLogits = request.topLogits ?? 0;
    this.filter = request.filter;
    this.pooling = request.pooling ?? null;
    this.promptTop = request.promptLogprobs ?? -1;
    this.sampler = new Sampler(request.sampling, vocabSize, request.prompt, choice);
    this.#stopIds = new Set(request.stopTokenIds);
    this.#observer = observer;
    const mode = speculative?.mode;
    this.speculation = (mode === "ngram" || mode === "draft") && speculative!.k > 0 &&
        this.pooling === null
      ? new Speculation({ ...speculative!, mode })
      : null;
  }

  /** Tokens it may still produce: a verification yields one more than it drafted. */
  get remaining(): number {
    return this.maxNew - this.generated;
  }

  /** Tokens not yet in the cache: the rest of the prompt, or the last sampled token. */
  get uncached(): number {
    return this.tokens.length - this.cached;
  }

  /** Still working through its prompt (or recomputing after preemption). */
  get prefilling(): boolean {
    return this.uncached > 1 || this.generated === 0;
  }

  /**
   * Whether it may start from a cached prefix: not when every prompt position's output is
   * needed (mean pooling, the first token's state, a scored prompt).
   */
  get reusesPrefix(): boolean {
    return (this.pooling === null || this.pooling === "last") && !this.#scoring;
  }

  /** Prompt tokens a step may carry for it at most. */
  get maxChunk(): number {
    return this.#scoring ? PROMPT_SCORING_CHUNK : Infinity;
  }

  /** Whether its next token, while it decodes, is a plain draw from its row alone
   * (draw_ahead.ts). */
  get drawsPlainly(): boolean {
    return !this.finished && this.pooling === null && this.generated > 0 &&
      this.filter === undefined && this.followers.length === 0 && this.sampler.plainSampled;
  }

  /** Whether its output rows of a step are all sampling rows, picked plainly greedily. */
  get argmaxOnly(): boolean {
    return this.pooling === null && this.sampler.plainGreedy && this.topLogits === 0 &&
      !this.#scoring && this.followers.length === 0;
  }

  /**
   * The masks native argmax picks its `rows` output rows of this step under (null: free),
   * asked before the forward pass; undefined when they must be read back: not picked
   * plainly greedily, or constrained and the filter cannot say (it allows nothing, or
   * failed: `restrict` then ends or fails the sequence as on any logits step), or
   * constrained with a draft (each row's mask follows from the tokens taken before it).
   */
  argmaxMasks(
    rows: number,
    drafted: boolean,
    vocabSize: number,
  ): (Uint32Array | null)[] | undefined {
    if (!this.argmaxOnly) return undefined;
    if (this.filter === undefined) return new Array(rows).fill(null);
    if (rows !== 1 || drafted) return undefined;
    try {
      const bits = this.filter.allowed?.(vocabSize);
      return bits ? [bits] : undefined;
    } catch (err) {
      if (err instanceof NeuronError) return undefined;
      throw err;
    }
  }

  get #scoring(): boolean {
    return this.promptTop >= 0 && !this.#promptReported;
  }

  /**
   * The rows (offsets into the run of tokens [start, start + count)) whose output a step
   * must return for this sequence; `sample`: the run reaches its last token.
   */
  outputRows(start: number, count: number, sample: boolean): number[] {
    const all = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
    switch (this.pooling) {
      case "mean":
        return all(count);
      case "cls":
        return start === 0 ? [0] : [];
      case "last":
        return sample ? [count - 1] : [];
    }
    const scored = this.#scoring ? Math.max(0, Math.min(count, this.promptLength - 1 - start)) : 0;
    return sample ? [...all(scored), count - 1] : all(scored);
  }

  /**
   * Takes the outputs of `outputRows(start, count, sample)`, in order. Returns the row to
   * sample the next token from (the last one, when `sample`); pooling and scoring rows are
   * consumed here, and a pooled sequence ends once its prompt has run.
   */
  takeOutputs(start: number, sample: boolean, rows: Float32Array[]): Float32Array | null {
    if (this.pooling !== null) {
      this.#addPooled(start, rows);
      if (sample) this.#finishPooled();
      return null;
    }
    const scoring = sample ? rows.length - 1 : rows.length;
    for (let i = 0; i < scoring; i++) {
      this.#scored[start + i] = tokenLogprobs(rows[i], this.tokens[start + i + 1], this.promptTop);
    }
    return sample ? rows[rows.length - 1] : null;
  }

  /**
   * The prompt has run (its last token's output is due): reports the scored prompt, and
   * says whether to sample. With no token to generate, the sequence ends here.
   */
  promptDone(): boolean {
    if (this.generated > 0) return true;
    if (this.#scoring) this.sharePrompt(this.#scored);
    if (this.maxNew > 0) return true;
    this.finish("length");
    return false;
  }

  /** Reports the scored prompt (its own, or that of the choice it was forked from). */
  sharePrompt(tokens: SampledToken[]): void {
    if (this.promptTop < 0 || this.#promptReported) return;
    this.#promptReported = true;
    this.promptScores = tokens;
    this.#scored = [];
    this.#observer.prompt?.(tokens);
  }

  /** Takes a sampled token; returns true when the sequence is finished. */
  onToken(sampled: SampledToken, topLogits: Array<[number, number]> | undefined): boolean {
    const id = sampled.id;
    this.sampler.accept(id);
    this.filter?.accept(id);
    this.generated++;
    this.tokens.push(id);
    const end: TokenEnd = this.#stopIds.has(id)
      ? "stop_token"
      : this.generated >= this.maxNew
      ? "length"
      : null;
    const stopped = this.#observer.token(sampled, topLogits, end);
    if (!stopped && end === null) return false;
    this.finish(stopped || end === "stop_token" ? "stop" : "length");
    return true;
  }

  /** Ends the sequence and says so, once. */
  finish(reason: EngineFinish): void {
    if (this.finished) return;
    this.finished = true;
    this.#observer.finished(reason, this.#counts());
  }

  /** Ends the sequence with an error instead of a finish reason. */
  fail(code: string, message: string): void {
    if (this.finished) return;
    this.finished = true;
    this.#observer.failed(code, message, this.#counts());
  }

  #addPooled(start: number, rows: Float32Array[]): void {
    if (rows.length === 0) return;
    // A prompt run again from its start (after preemption) pools again from nothing.
    if (start === 0 || this.#pool === null) {
      this.#pool = new Float64Array(rows[0].length);
      this.#pooledRows = 0;
    }
    const pool = this.#pool;
    for (const row of rows) {
      for (let j = 0; j < row.length; j++) pool[j] += row[j];
      this.#pooledRows++;
    }
  }

  #finishPooled(): void {
    const sum = this.#pool ?? new Float64Array(0);
    const n = Math.max(1, this.#pooledRows);
    this.#observer.pooled?.(Float32Array.from(sum, (v) => v / n));
    this.finish("stop");
  }

  #counts(): TokenCounts {
    return {
      promptTokens: this.promptLength,
      completionTokens: this.generated,
      cachedTokens: Math.max(0, this.reusedTokens),
    };
  }
}
