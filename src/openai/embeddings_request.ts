/**
 * `POST /v1/embeddings` requests (OpenAI's schema): `input` as a string, strings, token ids
 * or lists of token ids; `encoding_format` float or base64; `dimensions` (the first that
 * many features, normalised again: Matryoshka truncation).
 */

import { z } from "zod";
import type { PoolInput } from "../frontend/events.ts";
import { intAtLeast, nonEmpty } from "./limits.ts";
import { parseRequest } from "./validate.ts";

/** Inputs one request may carry, as OpenAI caps them. */
export const MAX_EMBEDDING_INPUTS = 2048;

const AT_LEAST_ONE = "must contain at least one input";
const AT_MOST = `at most ${MAX_EMBEDDING_INPUTS} inputs`;
const Text = nonEmpty();
const TokenIds = z.array(intAtLeast(0)).min(1, "must contain at least one token id");

export const embeddingsRequestSchema = z.object({
  model: nonEmpty(),
  input: z.union([
    Text,
    z.array(Text).min(1, AT_LEAST_ONE).max(MAX_EMBEDDING_INPUTS, AT_MOST),
    TokenIds,
    z.array(TokenIds).min(1, AT_LEAST_ONE).max(MAX_EMBEDDING_INPUTS, AT_MOST),
  ]),
  encoding_format: z.enum(["float", "base64"]).nullish(),
  dimensions: intAtLeast(1).nullish(),
  user: z.string().nullish(),
});

export type EmbeddingEncoding = "float" | "base64";

export interface EmbeddingsRequest {
  model: string;
  inputs: PoolInput[];
  encoding: EmbeddingEncoding;
  /** Features to keep (then normalised again); absent: all of them. */
  dimensions?: number;
}

function inputsOf(input: z.infer<typeof embeddingsRequestSchema>["input"]): PoolInput[] {
  if (typeof input === "string") return [{ kind: "text", text: input }];
  if (input.every((x) => typeof x === "number")) return [{ kind: "tokens", ids: input }];
  return input.map((x): PoolInput =>
    typeof x === "string" ? { kind: "text", text: x } : { kind: "tokens", ids: x as number[] }
  );
}

export function parseEmbeddingsRequest(json: unknown): EmbeddingsRequest {
  const body = parseRequest(embeddingsRequestSchema, json);
  return {
    model: body.model,
    inputs: inputsOf(body.input),
    encoding: body.encoding_format ?? "float",
    ...(body.dimensions != null ? { dimensions: body.dimensions } : {}),
  };
}
