/**
 * `POST /v1/responses` requests (OpenAI's Responses API), stateless: `input` as a string or
 * a list of items (messages, function calls and their outputs), `instructions` as the
 * system message, function tools. Anything that needs server-side state
 * (`previous_response_id`) or built-in tools is refused with a clear 400.
 */

import { z } from "zod";
import type { ChatMessage, ChatTool } from "../chat/mod.ts";
import { unsupported } from "./errors.ts";
import { maxNewTokens, reasoningEffort, requestedSampling, templateKwargs } from "./fields.ts";
import type { RequestedSampling } from "./generation.ts";
import { intAtLeast, nonEmpty, numberBetween, positiveAtMost } from "./limits.ts";
import {
  pickText,
  type StructuredOutput,
  structuredOutput,
  TextFormat,
  textFormatText,
} from "./output_constraint.ts";
import { issuePath, parseRequest } from "./validate.ts";

const TextPart = z.object({
  type: z.enum(["input_text", "output_text", "text"]),
  text: z.string(),
});
const OtherPart = z.object({ type: z.enum(["input_image", "input_file", "input_audio"]) });
const Part = z.discriminatedUnion("type", [TextPart, OtherPart]);

const MessageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["system", "developer", "user", "assistant"]),
  content: z.union([z.string(), z.array(Part)]),
});
const FunctionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: nonEmpty(),
  name: nonEmpty(),
  arguments: z.string(),
});
const FunctionOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: nonEmpty(),
  output: z.string(),
});
/** Earlier reasoning sent back by a client; the chat template drops it from history anyway. */
const ReasoningItem = z.object({ type: z.literal("reasoning") });
const Item = z.union([MessageItem, FunctionCallItem, FunctionOutputItem, ReasoningItem]);

const FunctionTool = z.object({
  type: z.literal("function"),
  name: nonEmpty(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
const AnyTool = z.looseObject({ type: z.string() });

export const responsesRequestSchema = z.object({
  model: nonEmpty(),
  input: z.union([z.string(), z.array(Item).min(1, "must contain at least one item")]),
  instructions: z.string().nullish(),
  max_output_tokens: intAtLeast(1).nullish(),
  temperature: numberBetween(0, 2).nullish(),
  top_p: positiveAtMost(1).nullish(),
  top_k: intAtLeast(-1).nullish(),
  min_p: numberBetween(0, 1).nullish(),
  seed: z.int().nullish(),
  stream: z.boolean().nullish(),
  tools: z.array(AnyTool).nullish(),
  tool_choice: z.union([
    z.enum(["none", "auto", "required"]),
    z.object({ type: z.literal("function"), name: nonEmpty() }),
  ]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  previous_response_id: z.string().nullish(),
  reasoning: z.object({ effort: reasoningEffort.nullish() }).nullish(),
  text: z.object({ format: TextFormat.nullish() }).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  store: z.boolean().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  user: z.string().nullish(),
});

type Body = z.infer<typeof responsesRequestSchema>;

export interface ResponsesRequest extends StructuredOutput {
  model: string;
  messages: ChatMessage[];
  tools: ChatTool[];
  templateKwargs: Record<string, unknown>;
  maxTokens?: number;
  sampling: RequestedSampling;
  stream: boolean;
  /** Echoed back in the response object. */
  echo: {
    instructions: string | null;
    temperature: number | null;
    top_p: number | null;
    max_output_tokens: number | null;
    tool_choice: unknown;
    tools: unknown[];
    metadata: Record<string, string>;
  };
}

function partsText(content: z.infer<typeof MessageItem>["content"], at: number): string {
  if (typeof content === "string") return content;
  return content.map((p, j) => {
    if (!("text" in p)) {
      throw unsupported(
        issuePath(["input", at, "content", j]),
        `input[${at}].content[${j}]: '${p.type}' parts are not supported: this model takes text only`,
      );
    }
    return p.text;
  }).join("\n");
}

function toMessages(body: Body): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (body.instructions) out.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    out.push({ role: "user", content: body.input });
    return out;
  }
  body.input.forEach((item, i) => {
    if (item.type === "reasoning") return;
    if (item.type === "function_call") {
      const call = {
        id: item.call_id,
        type: "function" as const,
        function: { name: item.name, arguments: item.arguments },
      };
      const last = out.at(-1);
      if (last?.role === "assistant") last.tool_calls = [...(last.tool_calls ?? []), call];
      else out.push({ role: "assistant", content: null, tool_calls: [call] });
      return;
    }
    if (item.type === "function_call_output") {
      out.push({ role: "tool", content: item.output, tool_call_id: item.call_id });
      return;
    }
    const role = item.role === "developer" ? "system" : item.role;
    out.push({ role, content: partsText(item.content, i) });
  });
  return out;
}

/** The function tools offered, and those left after `tool_choice`. */
function toTools(body: Body): { offered: ChatTool[]; chosen: ChatTool[] } {
  const tools = (body.tools ?? []).map((t, i): ChatTool => {
    const parsed = FunctionTool.safeParse(t);
    if (!parsed.success) {
      throw unsupported(
        `tools[${i}]`,
        t.type === "function"
          ? `tools[${i}]: ${parsed.error.issues[0].message}`
          : `tools[${i}]: '${t.type}' tools are not supported; only function tools are`,
      );
    }
    const f = parsed.data;
    return {
      type: "function",
      function: {
        name: f.name,
        ...(f.description ? { description: f.description } : {}),
        ...(f.parameters ? { parameters: f.parameters } : {}),
      },
    };
  });
  const choice = body.tool_choice;
  if (choice == null || choice === "auto") return { offered: tools, chosen: tools };
  if (choice === "none") return { offered: tools, chosen: [] };
  if (choice === "required") {
    if (tools.length === 0) {
      throw unsupported("tool_choice", "tool_choice 'required' needs at least one tool");
    }
    return { offered: tools, chosen: tools };
  }
  const named = tools.filter((t) => t.function.name === choice.name);
  if (named.length === 0) {
    throw unsupported("tool_choice", `tool_choice names '${choice.name}', which is not in tools`);
  }
  return { offered: tools, chosen: named };
}

export function parseResponsesRequest(json: unknown, headers: Headers): ResponsesRequest {
  const body = parseRequest(responsesRequestSchema, json);
  if (body.previous_response_id) {
    throw unsupported(
      "previous_response_id",
      "previous_response_id is not supported: responses are not stored; send the whole input",
    );
  }
  const { offered, chosen } = toTools(body);
  const choice = body.tool_choice;
  const structured = structuredOutput(
    pickText([textFormatText(body.text?.format)], {}),
    chosen,
    typeof choice === "object" && choice !== null ? { name: choice.name } : choice,
    body.parallel_tool_calls,
    (t) => `tools[${offered.indexOf(t)}].parameters`,
  );
  return {
    ...structured,
    model: body.model,
    messages: toMessages(body),
    tools: chosen,
    templateKwargs: templateKwargs(body.chat_template_kwargs, body.reasoning?.effort, headers),
    maxTokens: maxNewTokens(body.max_output_tokens, null),
    sampling: requestedSampling(body),
    stream: body.stream ?? false,
    echo: {
      instructions: body.instructions ?? null,
      temperature: body.temperature ?? null,
      top_p: body.top_p ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      tool_choice: body.tool_choice ?? "auto",
      tools: body.tools ?? [],
      metadata: body.metadata ?? {},
    },
  };
}
