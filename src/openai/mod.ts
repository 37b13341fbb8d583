/**
 * The OpenAI wire format: request schemas (chat completions, completions, responses) with
 * errors that name the field, and the answers, whole or streamed as server-sent events.
 * A leaf library: it knows nothing of engines or harnesses; a harness hands it a
 * `Generation` (events in this folder's own terms) and gets a Response back.
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
export { SSE_HEADERS, SseChannel } from "./sse.ts";
export { chatUsage, responsesUsage } from "./usage.ts";
