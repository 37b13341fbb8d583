/**
 * `/v1/rerank` answers as llama-server gives them: the `top_n` best documents, most
 * relevant first (ties in document order), each with its `index` in the request and its
 * `relevance_score` (the reranker's score: Qwen3's P(yes)), with the tokens of every pair
 * in `usage`.
 */

export interface RerankRenderOptions {
  model: string;
  documents: readonly string[];
  topN: number;
  returnDocuments: boolean;
}

export function rerankResponse(
  scores: readonly number[],
  promptTokens: number,
  opts: RerankRenderOptions,
): Record<string, unknown> {
  const order = scores.map((_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
  return {
    object: "list",
    model: opts.model,
    results: order.slice(0, opts.topN).map((index) => ({
      index,
      relevance_score: scores[index],
      ...(opts.returnDocuments ? { document: { text: opts.documents[index] } } : {}),
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
