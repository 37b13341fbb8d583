/**
 * `POST /v1/rerank` requests, in the Jina/Cohere shape llama-server serves: a `query`, the
 * `documents` to score against it (strings, or objects with a `text`), how many results to
 * return (`top_n`) and whether they carry their document (`return_documents`).
 */

import { z } from "zod";
import type { PoolInput } from "../frontend/events.ts";
import { intAtLeast, nonEmpty } from "./limits.ts";
import { parseRequest } from "./validate.ts";

/** Documents one request may carry. */
export const MAX_RERANK_DOCUMENTS = 1024;

export const rerankRequestSchema = z.object({
  model: nonEmpty(),
  query: nonEmpty(),
  documents: z.array(z.union([nonEmpty(), z.object({ text: nonEmpty() })]))
    .min(1, "must contain at least one document")
    .max(MAX_RERANK_DOCUMENTS, `at most ${MAX_RERANK_DOCUMENTS} documents`),
  top_n: intAtLeast(1).nullish(),
  return_documents: z.boolean().nullish(),
});

export interface RerankRequest {
  model: string;
  documents: string[];
  /** The query with each document, in order. */
  inputs: PoolInput[];
  /** Results to return at most (the best ones). */
  topN: number;
  returnDocuments: boolean;
}

export function parseRerankRequest(json: unknown): RerankRequest {
  const body = parseRequest(rerankRequestSchema, json);
  const documents = body.documents.map((d) => typeof d === "string" ? d : d.text);
  return {
    model: body.model,
    documents,
    inputs: documents.map((document) => ({ kind: "pair", query: body.query, document })),
    topN: Math.min(body.top_n ?? documents.length, documents.length),
    returnDocuments: body.return_documents ?? false,
  };
}
