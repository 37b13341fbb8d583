/**
 * What the OpenAI layer needs from whatever generates text: the request's generation
 * settings resolved into the engine's sampling parameters, and the event stream of one
 * generation (the front end's vocabulary: text deltas with per-token log-probs, tool
 * calls, the end with usage).
 */

import type { SamplingParams } from "../engine/sampler.ts";
import type { GenerationEvent } from "../frontend/events.ts";

export type {
  FinishReason,
  GeneratedToken,
  GenerationEvent,
  TokenAlternative,
  UsageCounts,
} from "../frontend/events.ts";

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
): SamplingParams {
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

/** A running generation, as the renderers consume it. */
export interface Generation {
  readonly promptTokens: number;
  readonly events: AsyncIterable<GenerationEvent>;
  /** Stops generating (client gone); the events then end soon after. */
  cancel(): void;
}
