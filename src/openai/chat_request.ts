/**
 * `POST /v1/chat/completions` requests: the schema (unknown fields ignored, as OpenAI's
 * newer fields keep arriving), then the checks a schema cannot express, then the
 * normalized form the harness runs.
 */

import { z } from "zod";
import { type ChatMessage, type ChatTool, ToolSchema } from "../chat/mod.ts";
import { unsupported } from "./errors.ts";
import {
  commonFields,
  maxNewTokens,
  reasoningEffort,
  requestedSampling,
  requestedSpeculation,
  stopStrings,
  templateKwargs,
} from "./fields.ts";
import type { SpeculativeParams } from "../engine/mod.ts";
import type { RequestedSampling } from "./generation.ts";
import { intAtLeast, intBetween, nonEmpty } from "./limits.ts";
import {
  checkChoices,
  pickText,
  ResponseFormat,
  responseFormatText,
  type StructuredOutput,
  structuredOutput,
} from "./output_constraint.ts";
import { issuePath, parseRequest } from "./validate.ts";

const TextPart = z.object({ type: z.literal("text"), text: z.string() });
/** Parts a text model cannot take; accepted by the schema so the refusal can say why. */
const MediaPart = z.object({
  type: z.enum(["image_url", "input_image", "input_audio", "file", "image", "audio"]),
});
const ContentPart = z.discriminatedUnion("type", [TextPart, MediaPart]);

const ToolCall = z.object({
  id: z.string().nullish(),
  type: z.literal("function").nullish(),
  function: z.object({
    name: nonEmpty(),
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  }),
});

const Message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  reasoning_content: z.string().nullish(),
  tool_calls: z.array(ToolCall).nullish(),
  name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
});

const ToolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: nonEmpty() }) }),
]);

export const chatRequestSchema = z.object({
  ...commonFields,
  messages: z.array(Message).min(1, "must contain at least one message"),
  max_tokens: intAtLeast(1).nullish(),
  max_completion_tokens: intAtLeast(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: intBetween(0, 20).nullish(),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: ToolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  reasoning_effort: reasoningEffort.nullish(),
  response_format: ResponseFormat.nullish(),
  grammar: z.string().nullish(),
  json_schema: z.record(z.string(), z.unknown()).nullish(),
  return_tokens_as_token_ids: z.boolean().nullish(),
});

export type ChatRequestBody = z.infer<typeof chatRequestSchema>;

/** A chat request, checked and normalized; `constraint`: what the output must be. */
export interface ChatRequest extends StructuredOutput {
  model: string;
  messages: ChatMessage[];
  tools: ChatTool[];
  templateKwargs: Record<string, unknown>;
  maxTokens?: number;
  sampling: RequestedSampling;
  stop: string[];
  logprobs: boolean;
  topLogprobs: number;
  /** Choices to generate. */
  n: number;
  stream: boolean;
  /** `[n]token_id:<id>` instead of token text in logprobs (vLLM's option). */
  tokensAsIds: boolean;
  /** Speculative decoding as the request asks (the `speculative` extension). */
  speculative?: Partial<SpeculativeParams>;
}

/** Messages as the template takes them: `developer` is `system`, text parts only. */
function toChatMessages(messages: ChatRequestBody["messages"]): ChatMessage[] {
  return messages.map((m, i) => {
    if (Array.isArray(m.content)) {
      const j = m.content.findIndex((p) => p.type !== "text");
      if (j >= 0) {
        throw unsupported(
          issuePath(["messages", i, "content", j]),
          `messages[${i}].content[${j}]: '${m.content[j].type}' parts are not supported: ` +
            `this model takes text only`,
        );
      }
    }
    const out: ChatMessage = {
      role: m.role === "developer" ? "system" : m.role,
      content: Array.isArray(m.content)
        ? m.content.map((p) => ({ type: "text" as const, text: (p as { text: string }).text }))
        : m.content,
    };
    if (m.reasoning_content) out.reasoning_content = m.reasoning_content;
    if (m.tool_calls?.length) {
      out.tool_calls = m.tool_calls.map((c) => ({
        ...(c.id ? { id: c.id } : {}),
        type: "function" as const,
        function: c.function,
      }));
    }
    if (m.name) out.name = m.name;
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    return out;
  });
}

/** The tools the model is offered, after `tool_choice`. */
export function chosenTools(
  tools: ChatTool[],
  choice: z.infer<typeof ToolChoice> | null | undefined,
): ChatTool[] {
  if (choice == null || choice === "auto") return tools;
  if (choice === "none") return [];
  if (choice === "required") {
    if (tools.length === 0) {
      throw unsupported("tool_choice", "tool_choice 'required' needs at least one tool");
    }
    return tools;
  }
  const named = tools.filter((t) => t.function.name === choice.function.name);
  if (named.length === 0) {
    throw unsupported(
      "tool_choice",
      `tool_choice names '${choice.function.name}', which is not in tools`,
    );
  }
  return named;
}

export function parseChatRequest(json: unknown, headers: Headers): ChatRequest {
  const body = parseRequest(chatRequestSchema, json);
  if (body.top_logprobs && !body.logprobs) {
    throw unsupported("top_logprobs", "top_logprobs requires logprobs to be true");
  }
  const offered = body.tools ?? [];
  const tools = chosenTools(offered, body.tool_choice);
  const choice = body.tool_choice;
  const text = pickText([responseFormatText(body.response_format)], body);
  const structured = structuredOutput(
    text,
    tools,
    typeof choice === "object" && choice !== null ? { name: choice.function.name } : choice,
    body.parallel_tool_calls,
    (t) => `tools[${offered.indexOf(t)}].function.parameters`,
  );
  checkChoices(body.n ?? 1, structured);
  return {
    ...structured,
    model: body.model,
    messages: toChatMessages(body.messages),
    tools,
    templateKwargs: templateKwargs(body.chat_template_kwargs, body.reasoning_effort, headers),
    maxTokens: maxNewTokens(body.max_completion_tokens, body.max_tokens),
    sampling: requestedSampling(body),
    stop: stopStrings(body.stop),
    logprobs: body.logprobs ?? false,
    topLogprobs: body.top_logprobs ?? 0,
    n: body.n ?? 1,
    stream: body.stream ?? false,
    tokensAsIds: body.return_tokens_as_token_ids ?? false,
    speculative: requestedSpeculation(body.speculative),
  };
}
