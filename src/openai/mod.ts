/**
 * The OpenAI wire format: request schemas (chat completions, completions, responses,
 * embeddings, rerank) with errors that name the field, and the answers, whole or streamed
 * as server-sent events.
 * It knows no engine or harness: a harness hands it a `Generation` (the front end's event
 * vocabulary) and gets a Response back; requests resolve into the engine's sampling
 * parameters (types only).
 */
export { GenerationError, OpenAiError, type OpenAiErrorCode } from "./errors.ts";
export * from "./generation.ts";
export { type ChatRequest, parseChatRequest } from "./chat_request.ts";
export {
  type CompletionPrompt,
  type CompletionRequest,
  parseCompletionRequest,
} from "./completion_request.ts";
export { parseResponsesRequest, type ResponsesRequest } from "./responses_request.ts";
export { chatCompletion, type ChatRenderOptions, streamChatCompletion } from "./chat_response.ts";
export {
  completion,
  type CompletionRenderOptions,
  streamCompletion,
} from "./completion_response.ts";
export { response, type ResponsesRenderOptions, streamResponse } from "./responses_response.ts";
export {
  type EmbeddingEncoding,
  type EmbeddingsRequest,
  parseEmbeddingsRequest,
} from "./embeddings_request.ts";
export {
  type EmbeddingsRenderOptions,
  embeddingsResponse,
  normalizedEmbedding,
} from "./embeddings_response.ts";
export { parseRerankRequest, type RerankRequest } from "./rerank_request.ts";
export { type RerankRenderOptions, rerankResponse } from "./rerank_response.ts";
export { SSE_HEADERS, SseChannel } from "./sse.ts";
export { chatUsage, responsesUsage } from "./usage.ts";
export type { StructuredOutput } from "./output_constraint.ts";
