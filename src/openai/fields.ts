/**
 * Request fields shared by chat completions, completions and responses, and their
 * translation into generation settings. Unset and `null` mean the same (clients send both).
 */

import { z } from "zod";
import {
  MAX_DRAFT_TOKENS,
  MAX_NGRAM,
  SPECULATIVE_MODES,
  type SpeculativeParams,
} from "../engine/mod.ts";
import type { RequestedSampling } from "./generation.ts";
import { intAtLeast, intBetween, nonEmpty, numberBetween, positiveAtMost } from "./limits.ts";

/** OpenAI allows up to 4 stop strings; llama-server and vLLM more. */
const MAX_STOPS = 16;
/** Choices one request may ask for, as OpenAI caps `n`. */
export const MAX_CHOICES = 128;

/**
 * Speculative decoding for one request (an extension): `mode` ngram (prompt lookup), draft
 * (a draft model loaded with the target) or off; `k` tokens drafted at most; `n` the
 * longest n-gram matched. What it leaves out comes from the model's default.
 */
const Speculative = z.strictObject({
  mode: z.enum(SPECULATIVE_MODES).nullish(),
  k: intBetween(0, MAX_DRAFT_TOKENS).nullish(),
  n: intBetween(1, MAX_NGRAM).nullish(),
});

/** Fields of chat completions and completions alike. */
export const commonFields = {
  temperature: numberBetween(0, 2).nullish(),
  top_p: positiveAtMost(1).nullish(),
  top_k: intAtLeast(-1).nullish(),
  min_p: numberBetween(0, 1).nullish(),
  presence_penalty: numberBetween(-2, 2).nullish(),
  frequency_penalty: numberBetween(-2, 2).nullish(),
  repetition_penalty: positiveAtMost(10).nullish(),
  seed: z.int().nullish(),
  logit_bias: z.record(
    z.string().regex(/^\d+$/, "keys must be token ids"),
    numberBetween(-100, 100),
  )
    .nullish(),
  stop: z.union([
    z.string(),
    z.array(z.string()).max(MAX_STOPS, `at most ${MAX_STOPS} stop sequences`),
  ]).nullish(),
  n: intBetween(1, MAX_CHOICES).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  user: z.string().nullish(),
  model: nonEmpty(),
  speculative: Speculative.nullish(),
};

type SamplingFields = {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  repetition_penalty?: number | null;
  seed?: number | null;
  logit_bias?: Record<string, number> | null;
};

export function requestedSampling(body: SamplingFields): RequestedSampling {
  const out: RequestedSampling = {};
  if (body.temperature != null) out.temperature = body.temperature;
  if (body.top_p != null) out.topP = body.top_p;
  if (body.top_k != null) out.topK = body.top_k;
  if (body.min_p != null) out.minP = body.min_p;
  if (body.presence_penalty != null) out.presencePenalty = body.presence_penalty;
  if (body.frequency_penalty != null) out.frequencyPenalty = body.frequency_penalty;
  if (body.repetition_penalty != null) out.repetitionPenalty = body.repetition_penalty;
  if (body.seed != null) out.seed = body.seed;
  if (body.logit_bias) {
    out.logitBias = new Map(Object.entries(body.logit_bias).map(([k, v]) => [Number(k), v]));
  }
  return out;
}

/** The request's `speculative` field, the fields it gives. */
export function requestedSpeculation(
  field: z.infer<typeof Speculative> | null | undefined,
): Partial<SpeculativeParams> | undefined {
  if (field == null) return undefined;
  const out: Partial<SpeculativeParams> = {};
  if (field.mode != null) out.mode = field.mode;
  if (field.k != null) out.k = field.k;
  if (field.n != null) out.n = field.n;
  return out;
}

export function stopStrings(stop: string | string[] | null | undefined): string[] {
  if (stop == null) return [];
  return (typeof stop === "string" ? [stop] : stop).filter((s) => s.length > 0);
}

/** `max_completion_tokens` wins over `max_tokens` (WIRE.md); absent = until the context ends. */
export function maxNewTokens(
  maxCompletionTokens: number | null | undefined,
  maxTokens: number | null | undefined,
): number | undefined {
  return maxCompletionTokens ?? maxTokens ?? undefined;
}

/** `x-include-thinking: 1` (or true/yes): the client shows reasoning. */
export function includeThinking(headers: Headers): boolean {
  const v = (headers.get("x-include-thinking") ?? "").trim().toLowerCase();
  return v === "1" || v === "true" || v === "yes";
}

/**
 * OpenAI's reasoning efforts (chat's `reasoning_effort`, the Responses API's
 * `reasoning.effort`). A Qwen3 model thinks or does not: "none" and "minimal" turn thinking
 * off, every other effort turns it on.
 */
export const reasoningEffort = z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"]);
export type ReasoningEffort = z.infer<typeof reasoningEffort>;

/**
 * The template kwargs a request renders with: its own `chat_template_kwargs`; when they do
 * not set `enable_thinking`, the reasoning effort decides, else the `x-include-thinking`
 * header.
 */
export function templateKwargs(
  kwargs: Record<string, unknown> | null | undefined,
  effort: ReasoningEffort | null | undefined,
  headers: Headers,
): Record<string, unknown> {
  const out = { ...(kwargs ?? {}) };
  if (out.enable_thinking === undefined) {
    out.enable_thinking = effort != null
      ? effort !== "none" && effort !== "minimal"
      : includeThinking(headers);
  }
  return out;
}
