/**
 * What the OpenAI layer needs from whatever generates text, in its own terms so this folder
 * depends on no engine: the request's generation settings, and the event stream of one
 * generation (text deltas with per-token log-probs, tool calls, the end with usage).
 */

/** Sampling settings as the request gave them; absent fields fall back to model defaults. */
export interface RequestedSampling {
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  repetitionPenalty?: number;
  seed?: number;
  logitBias?: Map<number, number>;
}

/** The model's own defaults (GGUF `general.sampling.*`). */
export interface ModelSamplingDefaults {
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
}

/** Fully resolved sampling: every knob has a value. */
export interface ResolvedSampling {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  logitBias?: Map<number, number>;
  seed?: number;
  logprobs: boolean;
  topLogprobs: number;
}

/** The temperature used when neither the request nor the model names one. */
export const FALLBACK_TEMPERATURE = 0.7;

/**
 * Request -> model defaults -> built-in (temperature 0.7, no truncation). Top-k, top-p and
 * min-p defaults of the model apply only when the request leaves them out; `top_k` of 0 or
 * -1 means off, as in vLLM.
 */
export function resolveSampling(
  req: RequestedSampling,
  defaults: ModelSamplingDefaults,
  logprobs: { logprobs: boolean; topLogprobs: number },
): ResolvedSampling {
  const topK = req.topK ?? defaults.topK ?? 0;
  return {
    temperature: req.temperature ?? defaults.temperature ?? FALLBACK_TEMPERATURE,
    topK: topK < 0 ? 0 : topK,
    topP: req.topP ?? defaults.topP ?? 1,
    minP: req.minP ?? defaults.minP ?? 0,
    repetitionPenalty: req.repetitionPenalty ?? 1,
    presencePenalty: req.presencePenalty ?? 0,
    frequencyPenalty: req.frequencyPenalty ?? 0,
    ...(req.logitBias ? { logitBias: req.logitBias } : {}),
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    logprobs: logprobs.logprobs,
    topLogprobs: logprobs.topLogprobs,
  };
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
  bytes: Uint8Array;
  logprob?: number;
  top?: TokenAlternative[];
}

export type FinishReason = "stop" | "length" | "tool_calls";

export interface UsageCounts {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  reasoningTokens: number;
}

export type GenerationEvent =
  | { type: "delta"; reasoning?: string; content?: string; tokens: GeneratedToken[] }
  | { type: "tool_call"; name: string; arguments: string }
  | { type: "done"; finishReason: FinishReason; usage: UsageCounts }
  /** Generation failed or was stopped by the node (unload, shutdown) after it started. */
  | { type: "error"; code: string; message: string };

/** A running generation, as the renderers consume it. */
export interface Generation {
  readonly promptTokens: number;
  readonly events: AsyncIterable<GenerationEvent>;
  /** Stops generating (client gone); the events then end soon after. */
  cancel(): void;
}
