import type { UsageCounts } from "./generation.ts";

/** Chat and completions `usage`; the details are left out when zero (WIRE.md). */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  completion_tokens_details?: { reasoning_tokens: number };
  prompt_tokens_details?: { cached_tokens: number };
}

export function chatUsage(u: UsageCounts): ChatUsage {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    ...(u.reasoningTokens > 0
      ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } }
      : {}),
    ...(u.cachedTokens > 0 ? { prompt_tokens_details: { cached_tokens: u.cachedTokens } } : {}),
  };
}

/**
 * The Responses API `usage`. It also carries `prompt_tokens` and `completion_tokens`: the
 * gateway meters every route by scanning for those names, and clients ignore extra fields.
 */
export function responsesUsage(u: UsageCounts): Record<string, unknown> {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens },
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
  };
}
