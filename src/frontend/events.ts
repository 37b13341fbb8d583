/**
 * What the front end hands back for a request: the one vocabulary of generation events,
 * from the front end through the harness to the OpenAI renderers. Plain data, so it
 * crosses from a model's Worker to the HTTP thread as it is.
 */

import type { ChatMessage, ChatTool } from "../chat/mod.ts";
import type { OutputConstraint } from "../constrain/mod.ts";
import type { SamplingParams } from "../engine/sampler.ts";

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
 * A generation's events. Every generation ends with exactly one `done`, with the usage of
 * what it produced so far (the gateway meters from it), and `fault` saying why when the
 * node ended it (`cancelled` by an unload, `error`).
 */
export type GenerationEvent =
  | { type: "delta"; reasoning?: string; content?: string; tokens: GeneratedToken[] }
  /** `id` where the model gave one or its format needs one of a given form (Mistral). */
  | { type: "tool_call"; name: string; arguments: string; id?: string }
  | { type: "done"; finishReason: FinishReason; usage: UsageCounts; fault?: GenerationFault };
