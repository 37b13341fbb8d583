/**
 * What the front end hands back for a request: the one vocabulary of generation events,
 * from the front end through the harness to the OpenAI renderers. Plain data, so it
 * crosses from a model's Worker to the HTTP thread as it is.
 */

import type { ChatMessage, ChatTool } from "../chat/mod.ts";
import type { OutputConstraint } from "../constrain/mod.ts";
import type { SamplingParams } from "../engine/sampler.ts";
import type { SpeculativeParams } from "../engine/mod.ts";

export type Prompt =
  | {
    kind: "messages";
    messages: ChatMessage[];
    tools?: ChatTool[];
    templateKwargs?: Record<string, unknown>;
  }
  | { kind: "text"; text: string }
  | { kind: "tokens"; ids: number[] };

/** A request as the front end takes it: text (or ids) in, generation events out. */
export interface GenerateRequest {
  id: string;
  prompt: Prompt;
  /** New tokens at most; absent = until the context is full. */
  maxTokens?: number;
  sampling: SamplingParams;
  stop?: string[];
  /** Keep going past end-of-generation tokens (benchmarks, goldens). */
  ignoreEos?: boolean;
  /** Report the top raw logits per step (the `generate` CLI). */
  topLogits?: number;
  /** Split reasoning and tool calls out of the text (chat); plain text otherwise. */
  parseOutput?: boolean;
  /** What the output must be (a grammar, JSON, tool calls), enforced while decoding. */
  constraint?: OutputConstraint;
  /** Tool calls at most: the generation ends after this many (`parallel_tool_calls: false`). */
  maxToolCalls?: number;
  /** Choices to generate from the prompt (one prefill, each its own sampler stream); default 1. */
  n?: number;
  /**
   * Hand the prompt back first (a `prompt` event: its text and tokens), as `echo` asks;
   * with `promptLogprobs`, each token after the first with its log-prob and this many
   * alternatives (scoring).
   */
  echo?: boolean;
  promptLogprobs?: number;
  /** Speculative decoding for this request; what it leaves out: the model's default. */
  speculative?: Partial<SpeculativeParams>;
}

/** One input of a pooling request: a text, token ids, or a reranker's query and document. */
export type PoolInput =
  | { kind: "text"; text: string }
  | { kind: "tokens"; ids: number[] }
  | { kind: "pair"; query: string; document: string };

/** Inputs to embed (an embedding model) or query/document pairs to score (a reranker). */
export interface PoolRequest {
  id: string;
  inputs: PoolInput[];
}

/**
 * What a pooling request gives: per input, in order, the pooled final hidden state (an
 * embedding model, not normalised) or the relevance score (a reranker's head output).
 */
export interface PoolResult {
  vectors: Float32Array[];
  scores: number[];
  /** Tokens of every input together. */
  promptTokens: number;
}

/** One alternative at a step, with its bytes so it can be shown as text. */
export interface TokenAlternative {
  id: number;
  bytes: Uint8Array;
  logprob: number;
}

/** One generated token. */
export interface GeneratedToken {
  id: number;
  /** The token's bytes (a token may hold part of a UTF-8 character). */
  bytes: Uint8Array;
  logprob?: number;
  top?: TokenAlternative[];
  /** Raw logits of the best `topLogits` candidates at this step, best first. */
  topLogits?: Array<[number, number]>;
}

/**
 * Why a generation ended: as OpenAI says it, `cancelled` (the client left or the node
 * stopped it: unload, shutdown) or `error` (it could not go on: a failed step, a worker
 * gone).
 */
export type FinishReason = "stop" | "length" | "tool_calls" | "cancelled" | "error";

/** Why the node ended a generation early: a stable code and a message for people. */
export interface GenerationFault {
  code: string;
  message: string;
}

export interface UsageCounts {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

/**
 * A generation's events. Every choice of a generation ends with exactly one `done`, with
 * the usage of what it produced so far (the gateway meters from it; the prompt is counted
 * by the first choice only), and `fault` saying why when the node ended it (`cancelled` by
 * an unload, `error`). `choice` says which choice an event belongs to (absent: the first).
 */
export type GenerationEvent =
  | {
    type: "delta";
    reasoning?: string;
    content?: string;
    tokens: GeneratedToken[];
    choice?: number;
  }
  /** `id` where the model gave one or its format needs one of a given form (Mistral). */
  | { type: "tool_call"; name: string; arguments: string; id?: string; choice?: number }
  /**
   * The prompt handed back (`echo`): its text and its tokens, those after the first with
   * their log-probs when the prompt was scored. Before anything else of its choice.
   */
  | { type: "prompt"; text: string; tokens: GeneratedToken[]; choice?: number }
  | {
    type: "done";
    finishReason: FinishReason;
    usage: UsageCounts;
    fault?: GenerationFault;
    choice?: number;
  };
