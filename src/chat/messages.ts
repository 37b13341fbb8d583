/**
 * OpenAI chat messages and tools, and their conversion into what a chat template sees,
 * following llama-server's conventions (common_chat_msgs_parse_oaicompat and
 * to_json_oaicompat) so prompts match the ones llama.cpp renders:
 * - content may be a string, text parts (joined with "\n") or null (rendered as "");
 * - tool-call arguments given as an object are serialized to a JSON string;
 * - tools are reduced to {type, function: {name, description, parameters}};
 * - empty reasoning_content, name and tool_call_id are left out.
 */

import { z } from "zod";
import { ChatError } from "./errors.ts";

const TextPart = z.object({ type: z.literal("text"), text: z.string() });

const ToolCallSchema = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({
    name: z.string(),
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  }),
});

export const ChatMessageSchema = z.object({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(TextPart), z.null()]).optional(),
  reasoning_content: z.string().nullable().optional(),
  tool_calls: z.array(ToolCallSchema).nullable().optional(),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
});

export const ToolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1, "must not be empty"),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

export type ChatMessage = z.infer<typeof ChatMessageSchema>;
export type ChatTool = z.infer<typeof ToolSchema>;
export type ChatToolCall = z.infer<typeof ToolCallSchema>;

/** A message as the template receives it. */
export interface TemplateMessage {
  role: string;
  content: string;
  reasoning_content?: string;
  tool_calls?: {
    type: "function";
    function: { name: string; arguments: string | Record<string, unknown> };
    id?: string;
  }[];
  name?: string;
  tool_call_id?: string;
}

export interface TemplateTool {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

function describe(issues: z.core.$ZodIssue[], what: string): string {
  const issue = issues[0];
  const path = issue.path.reduce<string>(
    (acc, key) => typeof key === "number" ? `${acc}[${key}]` : `${acc}.${String(key)}`,
    what,
  );
  return `${path}: ${issue.message}`;
}

/** Checks untrusted JSON (a request body, a file) against the OpenAI message shape. */
export function parseMessages(value: unknown): ChatMessage[] {
  const result = z.array(ChatMessageSchema).min(1).safeParse(value);
  if (!result.success) {
    throw new ChatError("invalid_request", describe(result.error.issues, "messages"));
  }
  return result.data;
}

/** Checks untrusted JSON against the OpenAI tools shape. */
export function parseTools(value: unknown): ChatTool[] {
  const result = z.array(ToolSchema).safeParse(value);
  if (!result.success) {
    throw new ChatError("invalid_request", describe(result.error.issues, "tools"));
  }
  return result.data;
}

function contentText(content: ChatMessage["content"]): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  let text = "";
  for (const part of content) {
    if (text !== "") text += "\n";
    text += part.text;
  }
  return text;
}

export function toTemplateMessage(message: ChatMessage): TemplateMessage {
  const out: TemplateMessage = { role: message.role, content: contentText(message.content) };
  if (message.reasoning_content) out.reasoning_content = message.reasoning_content;
  if (message.tool_calls && message.tool_calls.length > 0) {
    out.tool_calls = message.tool_calls.map((call) => {
      const args = call.function.arguments;
      return {
        type: "function",
        function: {
          name: call.function.name,
          arguments: typeof args === "string" ? args : JSON.stringify(args),
        },
        ...(call.id ? { id: call.id } : {}),
      };
    });
  }
  if (message.name) out.name = message.name;
  if (message.tool_call_id) out.tool_call_id = message.tool_call_id;
  return out;
}

export function toTemplateTool(tool: ChatTool): TemplateTool {
  return {
    type: "function",
    function: {
      name: tool.function.name,
      description: tool.function.description ?? "",
      parameters: tool.function.parameters ?? {},
    },
  };
}
