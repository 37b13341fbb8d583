/**
 * What crosses the boundary between the HTTP thread and a model's engine Worker. Plain,
 * structured-cloneable data only.
 */

import type { ChatMessage, ChatTool } from "../chat/mod.ts";
import type { SamplingParams } from "./sampler.ts";

export type Prompt =
  | {
    kind: "messages";
    messages: ChatMessage[];
    tools?: ChatTool[];
    templateKwargs?: Record<string, unknown>;
  }
  | { kind: "text"; text: string }
  | { kind: "tokens"; ids: number[] };

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
}

/** A candidate token and its log-probability. */
export interface TokenCandidate {
  id: number;
  /** The token's bytes, so the HTTP side can show it without a tokenizer. */
  bytes: number[];
  logprob: number;
}

/** One generated token, as the API's logprobs and the CLI need it. */
export interface TokenInfo {
  id: number;
  /** The token's bytes (a token may hold part of a UTF-8 character). */
  bytes: number[];
  logprob?: number;
  top?: TokenCandidate[];
  /** Raw logits of the best `topLogits` candidates at this step, best first. */
  topLogits?: Array<[number, number]>;
}

export interface ToolCallOut {
  name: string;
  /** JSON text. */
  arguments: string;
}

export type FinishReason = "stop" | "length" | "tool_calls" | "cancelled";

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

export type EngineEvent =
  | { type: "accepted"; id: string; promptTokens: number }
  | { type: "delta"; id: string; reasoning?: string; content?: string; tokens: TokenInfo[] }
  | { type: "tool_call"; id: string; call: ToolCallOut }
  | { type: "done"; id: string; finishReason: FinishReason; usage: Usage }
  | { type: "error"; id: string; code: string; message: string };

/** What a loaded model looks like from outside. */
export interface ModelDescription {
  path: string;
  architecture: string;
  /** e.g. "Q8_0", from general.file_type or the dominant tensor type. */
  quantization: string;
  contextLength: number;
  /** Bytes of weights (mapped) and of the KV cache. */
  weightBytes: number;
  kvBytes: number;
  /** Bytes held on the GPU after loading (0 on the CPU). */
  deviceBytes: number;
  vocabSize: number;
  device: string;
  hasToolCalls: boolean;
  hasReasoning: boolean;
  /** Sampling defaults from the GGUF (`general.sampling.*`). */
  samplingDefaults: { temperature?: number; topK?: number; topP?: number; minP?: number };
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
}

export type HostMessage =
  | { op: "load"; options: EngineOptions; doorbell: SharedArrayBuffer }
  | { op: "generate"; request: GenerateRequest }
  | { op: "cancel"; id: string }
  | { op: "stats"; tag: number }
  | { op: "close" };

export type WorkerMessage =
  | { op: "loaded"; description: ModelDescription }
  | { op: "load_failed"; code: string; message: string }
  | { op: "event"; event: EngineEvent }
  | { op: "stats"; tag: number; stats: EngineStats }
  | { op: "closed" };

export interface EngineOptions {
  modelPath: string;
  /** "auto" picks CUDA when present, else the CPU kernels. */
  device: "auto" | "cpu" | "cuda" | "reference";
  /** CPU threads (0 = all cores). */
  threads: number;
  /** CPU: weights read in place from the mmapped file (default) or copied (false). */
  mmap?: boolean;
  /** Cap on the context (0 = the model's). Never silently below what a request needs. */
  contextLength: number;
  /** Sequences decoded together. */
  maxSequences: number;
  /** Tokens per step at most (prefill chunk size). */
  maxBatchTokens: number;
  /** Steps carrying prompt chunks are sized to take about this long (default 150 ms). */
  stepTargetMs?: number;
  /** CUDA library names or paths ([cuda] of neuron.toml). */
  cuda?: { libcuda?: string; libcublas?: string };
  /** KV cache pool size in bytes (never less than one full context; absent = that). */
  kvBudgetBytes?: number;
  kvDtype: "f16" | "f32";
  /** Ranks the model is split over (tensor parallelism); absent or 1: one device. */
  tensorParallel?: number;
  /** The CUDA device of each rank (WIRE.md `devices`). */
  devices?: number[];
}
