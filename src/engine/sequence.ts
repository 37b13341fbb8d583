/**
 * One request inside the engine core: its tokens, its place in the KV cache, its sampler,
 * and when it ends (a stop token, its token budget, or its observer's say).
 */

import type {
  EngineFinish,
  EngineRequest,
  SequenceObserver,
  TokenCounts,
  TokenEnd,
  TokenFilter,
} from "./request.ts";
import { type SampledToken, Sampler } from "./sampler.ts";

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
  generated = 0;
  finished = false;

  readonly #stopIds: ReadonlySet<number>;
  readonly #observer: SequenceObserver;

  constructor(
    request: EngineRequest,
    maxNew: number,
    vocabSize: number,
    observer: SequenceObserver,
  ) {
    this.id = request.id;
    this.tokens = Array.from(request.prompt);
    this.promptLength = request.prompt.length;
    this.reuseBoundary = Math.min(request.reuseBoundary ?? Infinity, request.prompt.length);
    this.maxNew = maxNew;
    this.topLogits = request.topLogits ?? 0;
    this.filter = request.filter;
    this.sampler = new Sampler(request.sampling, vocabSize, request.prompt);
    this.#stopIds = new Set(request.stopTokenIds);
    this.#observer = observer;
  }

  /** Tokens not yet in the cache: the rest of the prompt, or the last sampled token. */
  get uncached(): number {
    return this.tokens.length - this.cached;
  }

  /** Still working through its prompt (or recomputing after preemption). */
  get prefilling(): boolean {
    return this.uncached > 1 || this.generated === 0;
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

  #counts(): TokenCounts {
    return {
      promptTokens: this.promptLength,
      completionTokens: this.generated,
      cachedTokens: Math.max(0, this.reusedTokens),
    };
  }
}
