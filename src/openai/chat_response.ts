/**
 * Chat completion answers: the `chat.completion` object, or the `chat.completion.chunk`
 * stream in WIRE.md's order: role, reasoning deltas, content deltas, one chunk per tool
 * call, the finish chunk, the usage chunk (always: the gateway meters it), `[DONE]`.
 */

import { errorMessage } from "../common/errors.ts";
import { cutShort, endedEarly, unfinished } from "./errors.ts";
import type { FinishReason, GeneratedToken, Generation, UsageCounts } from "./generation.ts";
import { nowSeconds, randomId } from "./ids.ts";
import { chatLogprobs } from "./logprobs.ts";
import { SseChannel, sseResponse, streamError, streamFault } from "./sse.ts";
import { chatUsage } from "./usage.ts";

export interface ChatRenderOptions {
  model: string;
  logprobs: boolean;
  tokensAsIds: boolean;
  /** Milliseconds between keep-alive comments while nothing else is sent. */
  keepAliveMs?: number;
}

export interface ToolCallOut {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A call's id is the model's (or its format's) where it has one. */
function toolCall(e: { name: string; arguments: string; id?: string }): ToolCallOut {
  return {
    id: e.id ?? randomId("call_"),
    type: "function",
    function: { name: e.name, arguments: e.arguments },
  };
}

/** The whole answer, once generation ended. Throws GenerationError on a failed generation. */
export async function chatCompletion(
  gen: Generation,
  opts: ChatRenderOptions,
): Promise<Record<string, unknown>> {
  const id = randomId("chatcmpl-");
  const created = nowSeconds();
  let reasoning = "";
  let content = "";
  const calls: ToolCallOut[] = [];
  const tokens: GeneratedToken[] = [];
  let finish: FinishReason = "stop";
  let usage: UsageCounts | null = null;
  for await (const e of gen.events) {
    if (e.type === "delta") {
      reasoning += e.reasoning ?? "";
      content += e.content ?? "";
      tokens.push(...e.tokens);
    } else if (e.type === "tool_call") {
      calls.push(toolCall(e));
    } else {
      if (cutShort(e.finishReason)) throw unfinished(e);
      finish = e.finishReason;
      usage = e.usage;
    }
  }
  if (usage === null) throw endedEarly();
  const message: Record<string, unknown> = {
    role: "assistant",
    content: calls.length > 0 && content === "" ? null : content,
  };
  if (reasoning) {
    message.reasoning_content = reasoning;
    message.reasoning = reasoning;
  }
  if (calls.length > 0) message.tool_calls = calls;
  return {
    id,
    object: "chat.completion",
    created,
    model: opts.model,
    choices: [{
      index: 0,
      message,
      logprobs: opts.logprobs ? { content: chatLogprobs(tokens, opts.tokensAsIds) } : null,
      finish_reason: finish,
    }],
    usage: chatUsage(usage),
  };
}

/** The streamed answer; the body starts with the role chunk at once. */
export function streamChatCompletion(gen: Generation, opts: ChatRenderOptions): Response {
  const sse = new SseChannel(() => gen.cancel(), opts.keepAliveMs);
  const base = {
    id: randomId("chatcmpl-"),
    object: "chat.completion.chunk",
    created: nowSeconds(),
  };
  let pending: GeneratedToken[] = [];
  const chunk = (delta: Record<string, unknown>, finish: FinishReason | null): void => {
    const choice: Record<string, unknown> = {
      index: 0,
      delta,
      logprobs: null,
      finish_reason: finish,
    };
    if (opts.logprobs && pending.length > 0) {
      choice.logprobs = { content: chatLogprobs(pending, opts.tokensAsIds) };
      pending = [];
    }
    sse.data({ ...base, model: opts.model, choices: [choice] });
  };

  (async () => {
    chunk({ role: "assistant" }, null);
    const calls: ToolCallOut[] = [];
    try {
      for await (const e of gen.events) {
        if (e.type === "delta") {
          pending.push(...e.tokens);
          if (e.reasoning) chunk({ reasoning_content: e.reasoning, reasoning: e.reasoning }, null);
          if (e.content) chunk({ content: e.content }, null);
        } else if (e.type === "tool_call") {
          calls.push(toolCall(e));
        } else {
          // Cut short, the stream still ends as every stream does: finish, usage, [DONE].
          if (e.fault) {
            streamFault(sse, e.fault.code, e.fault.message);
          }
          calls.forEach((c, index) => chunk({ tool_calls: [{ index, ...c }] }, null));
          chunk({}, e.finishReason);
          sse.data({ ...base, model: opts.model, choices: [], usage: chatUsage(e.usage) });
          sse.done();
        }
      }
    } catch (err) {
      streamError(sse, "internal_error", errorMessage(err));
    } finally {
      sse.close();
    }
  })();
  return sseResponse(sse);
}
