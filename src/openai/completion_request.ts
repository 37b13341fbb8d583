/**
 * `POST /v1/completions` requests: a text prompt or token ids, `n` choices, and `echo`:
 * the prompt handed back first, scored with `logprobs` (with `max_tokens` 0, scored only:
 * what evaluation harnesses send for log-likelihoods).
 */

import { z } from "zod";
import { unsupported } from "./errors.ts";
import type { SpeculativeParams } from "../engine/mod.ts";
import {
  commonFields,
  maxNewTokens,
  requestedSampling,
  requestedSpeculation,
  stopStrings,
} from "./fields.ts";
import type { RequestedSampling } from "./generation.ts";
import { intAtLeast, intBetween } from "./limits.ts";
import {
  checkChoices,
  pickText,
  ResponseFormat,
  responseFormatText,
  type StructuredOutput,
  structuredOutput,
} from "./output_constraint.ts";
import { parseRequest } from "./validate.ts";

/** OpenAI's legacy completions default to 16 new tokens when max_tokens is absent. */
export const DEFAULT_COMPLETION_TOKENS = 16;

const AT_LEAST_ONE = "must contain at least one prompt or token id";
const TokenIds = z.array(intAtLeast(0)).min(1, AT_LEAST_ONE);

export const completionRequestSchema = z.object({
  ...commonFields,
  prompt: z.union([
    z.string(),
    z.array(z.string()).min(1, AT_LEAST_ONE),
    TokenIds,
    z.array(TokenIds).min(1, AT_LEAST_ONE),
  ]),
  max_tokens: intAtLeast(0).nullish(),
  logprobs: intBetween(0, 20).nullish(),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
  best_of: intAtLeast(1).nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
  response_format: ResponseFormat.nullish(),
  grammar: z.string().nullish(),
  json_schema: z.record(z.string(), z.unknown()).nullish(),
});

export type CompletionPrompt = { kind: "text"; text: string } | { kind: "tokens"; ids: number[] };

export interface CompletionRequest extends StructuredOutput {
  model: string;
  prompt: CompletionPrompt;
  maxTokens?: number;
  sampling: RequestedSampling;
  stop: string[];
  /** Alternatives per token to report; null = no log-probs. */
  logprobs: number | null;
  /** Hand the prompt back before the completion (scored when `logprobs` is set). */
  echo: boolean;
  /** Choices to generate. */
  n: number;
  stream: boolean;
  tokensAsIds: boolean;
  /** Speculative decoding as the request asks (the `speculative` extension). */
  speculative?: Partial<SpeculativeParams>;
}

function singlePrompt(prompt: z.infer<typeof completionRequestSchema>["prompt"]): CompletionPrompt {
  if (typeof prompt === "string") return { kind: "text", text: prompt };
  if (prompt.length > 1 && (typeof prompt[0] === "string" || Array.isArray(prompt[0]))) {
    throw unsupported(
      "prompt",
      `${prompt.length} prompts in one request are not supported: send one prompt per request`,
    );
  }
  const first = prompt[0];
  if (typeof first === "string") return { kind: "text", text: first };
  if (Array.isArray(first)) return { kind: "tokens", ids: first };
  return { kind: "tokens", ids: prompt as number[] };
}

export function parseCompletionRequest(json: unknown): CompletionRequest {
  const body = parseRequest(completionRequestSchema, json);
  if (body.best_of != null && body.best_of > 1) {
    throw unsupported("best_of", "best_of above 1 is not supported");
  }
  if (body.suffix) throw unsupported("suffix", "suffix (fill-in-the-middle) is not supported");
  const text = pickText([responseFormatText(body.response_format)], body);
  const structured = structuredOutput(text, [], null, null, () => "");
  checkChoices(body.n ?? 1, structured);
  return {
    ...structured,
    model: body.model,
    prompt: singlePrompt(body.prompt),
    maxTokens: maxNewTokens(null, body.max_tokens) ?? DEFAULT_COMPLETION_TOKENS,
    sampling: requestedSampling(body),
    stop: stopStrings(body.stop),
    logprobs: body.logprobs ?? null,
    echo: body.echo ?? false,
    n: body.n ?? 1,
    stream: body.stream ?? false,
    tokensAsIds: body.return_tokens_as_token_ids ?? false,
    speculative: requestedSpeculation(body.speculative),
  };
}
