/**
 * What the engine core takes and gives: requests as token ids, and per request an
 * observer told of every sampled token and of the end. Text (templates, tokenizing,
 * stop strings, parsing) is the front end's.
 */

import type { Pooling } from "../models/pooling.ts";
import type { SampledToken, SamplingParams } from "./sampler.ts";
import type { ModelRunner } from "../runner/runner.ts";
import type { SpeculativeParams } from "./spec/speculation.ts";
import type { TokenFilter } from "./token_filter.ts";

export interface EngineRequest {
  id: string;
  prompt: readonly number[];
  /** New tokens at most (0: none, the prompt is only run); absent = until the context is full. */
  maxTokens?: number;
  sampling: SamplingParams;
  /** Tokens that end the generation (the model's end-of-generation ids; none = ignore them). */
  stopTokenIds: readonly number[];
  /** Raw top logits to report per step (0 = none). */
  topLogits?: number;
  /**
   * How much of the prompt a later request may reuse, to the token: a chat history is
   * re-rendered every turn, and only up to its last turn's opening is sure to come back
   * token for token. Default: the whole prompt.
   */
  reuseBoundary?: number;
  /**
   * Pool the prompt's final hidden states this way instead of generating (an embedding
   * model's input, a reranker's pair): the observer's `pooled` hears the vector. Only an
   * engine whose steps return hidden states (EngineOptions.hidden) takes it.
   */
  pooling?: Pooling;
  /**
   * Report the log-prob of every prompt token after the first, with this many most likely
   * alternatives each (the observer's `prompt`, before any generated token): scoring, as
   * `echo` with `logprobs` asks. Absent: none.
   */
  promptLogprobs?: number;
  /** Narrows every next token to those a constraint allows (structured output). */
  filter?: TokenFilter;
  /** Speculative decoding for this request; what it leaves out: the engine's default. */
  speculative?: Partial<SpeculativeParams>;
}

/** How the engine ended a sequence. */
export type EngineFinish = "stop" | "length" | "cancelled";

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens served from the prefix cache. */
  cachedTokens: number;
}

/** Why the engine ends a sequence with the token it reports, if it does. */
export type TokenEnd = "stop_token" | "length" | null;

/** Hears one request's tokens, in the engine's thread, in order. */
export interface SequenceObserver {
  /**
   * A token was sampled; `top` holds the raw top logits when asked for. `end` says the
   * engine ends the sequence with this token. Returns true to end it here anyway (a stop
   * string completed).
   */
  token(token: SampledToken, top: Array<[number, number]> | undefined, end: TokenEnd): boolean;
  /**
   * The prompt's tokens after the first, each with its log-prob given the tokens before it
   * (EngineRequest.promptLogprobs); once, before any token.
   */
  prompt?(tokens: SampledToken[]): void;
  /** The prompt's pooled final hidden state (EngineRequest.pooling); `finished` follows. */
  pooled?(vector: Float32Array): void;
  /** The sequence ended; nothing follows. */
  finished(reason: EngineFinish, counts: TokenCounts): void;
  /** The sequence failed (its step could not run); nothing follows. */
  failed(code: string, message: string, counts: TokenCounts): void;
}

export interface EngineOptions {
  /** Context length the engine allows (prompt and generated tokens). */
  contextLength: number;
  /** Sequences decoded together. */
  maxSequences: number;
  /** Tokens per step at most (prefill chunk size). */
  maxBatchTokens: number;
  /** Steps carrying prompt chunks are sized to take about this long (default 150 ms). */
  stepTargetMs?: number;
  /** The KV cache pool the runner holds: blocks of `blockSize` positions. */
  kv: { blockSize: number; nBlocks: number };
  /**
   * The model pools (an embedding or rerank model): every step returns final hidden
   * states, every request asks for a pooling, none generates, and steps are packed with
   * whole prompts up to `maxBatchTokens`, whatever they take (`stepTargetMs` is for
   * decoding streams, which such an engine has none of), and never stopped midway.
   */
  hidden?: boolean;
  /** Speculative decoding for requests that do not say (the model's default; else off). */
  speculative?: Partial<SpeculativeParams>;
  /**
   * A draft model of the same vocabulary for `draft` speculation, with the KV pool its
   * runner holds (the runner stays its opener's to close).
   */
  draft?: { runner: ModelRunner; kv: { blockSize: number; nBlocks: number } };
}

export interface EngineStats {
  running: number;
  waiting: number;
  /** KV cache blocks held by sequences, available (free or evictable), cached for reuse. */
  kvBlocksUsed: number;
  kvBlocksFree: number;
  kvBlocksCached: number;
  /** Prefix-cache lookups and hits, in blocks. */
  prefixLookups: number;
  prefixHits: number;
  preemptions: number;
  /** Prompt-only steps stopped for an arriving request (engine.ts, `step`). */
  interruptedSteps: number;
  steps: number;
  meanBatchTokens: number;
  prefillTokens: number;
  prefillSeconds: number;
  decodeTokens: number;
  decodeSeconds: number;
  /** Speculative decoding: verifications run, tokens drafted, drafted tokens accepted,
   * and tokens the verifications produced (accepted ones and the one sampled after). */
  specVerifications: number;
  specDrafted: number;
  specAccepted: number;
  specTokens: number;
}
