/**
 * Chat completion answers: the `chat.completion` object, or the `chat.completion.chunk`
 * stream in WIRE.md's order: role, reasoning deltas, content deltas, one chunk per tool
 * call, the finish chunk, the usage chunk (always: the gateway meters it), `[DONE]`. With
 * `n` choices every chunk names its choice's index, each choice has its own role and
 * finish chunks, and the usage chunk follows the last choice's end.
 */

import { errorMessage } from "../common/errors.ts";
import { choiceOf, UsageTotal } from "./choices.ts";
import { cutShort, endedEarly, unfinished } from "./errors.ts";
import type { FinishReason, GeneratedToken, Generation } from "./generation.ts";
import { nowSeconds, randomId } from "./ids.ts";
import { chatLogprobs } from "./logprobs.ts";
import { SseChannel, sseResponse, streamError, streamFault } from "./sse.ts";
import { chatUsage } from "./usage.ts";

export interface ChatRenderOptions {
  model: string;
  logprobs: boolean;
  tokensAsIds: boolean;
  /** Choices the generation makes (default 1). */
  n?: number;
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

interface ChoiceState {
  reasoning: string;
  content: string;
  calls: ToolCallOut[];
  tokens: GeneratedToken[];
  finish: FinishReason | null;
}

/** The whole answer, once generation ended. Throws GenerationError on a failed generation. */
export async function chatCompletion(
  gen: Generation,
  opts: ChatRenderOptions,
): Promise<Record<string, unknown>> {
  const id = randomId("chatcmpl-");
  const created = nowSeconds();
  const choices = Array.from({ length: opts.n ?? 1 }, (): ChoiceState => ({
    reasoning: "",
    content: "",
    calls: [],
    tokens: [],
    finish: null,
  }));
  const usage = new UsageTotal();
  for await (const e of gen.events) {
    const c = choices[choiceOf(e)];
    if (c === undefined) continue;
    if (e.type === "delta") {
      c.reasoning += e.reasoning ?? "";
      c.content += e.content ?? "";
      c.tokens.push(...e.tokens);
    } else if (e.type === "tool_call") {
      c.calls.push(toolCall(e));
    } else if (e.type === "done") {
      if (cutShort(e.finishReason)) throw unfinished(e);
      c.finish = e.finishReason;
      usage.add(e.usage);
    }
  }
  if (choices.some((c) => c.finish === null)) throw endedEarly();
  return {
    id,
    object: "chat.completion",
    created,
    model: opts.model,
    choices: choices.map((c, index) => ({
      index,
      message: message(c),
      logprobs: opts.logprobs ? { content: chatLogprobs(c.tokens, opts.tokensAsIds) } : null,
      finish_reason: c.finish,
    })),
    usage: chatUsage(usage.counts),
  };
}

function message(c: ChoiceState): Record<string, unknown> {
  const out: Record<string, unknown> = {
    role: "assistant",
    content: c.calls.length > 0 && c.content === "" ? null : c.content,
  };
  if (c.reasoning) {
    out.reasoning_content = c.reasoning;
    out.reasoning = c.reasoning;
  }
  if (c.calls.length > 0) out.tool_calls = c.calls;
  return out;
}

/** The streamed answer; the body starts with the role chunks at once. */
export function streamChatCompletion(gen: Generation, opts: ChatRenderOptions): Response {
  const sse = new SseChannel(() => gen.cancel(), opts.keepAliveMs);
  const n = opts.n ?? 1;
  const base = {
    id: randomId("chatcmpl-"),
    object: "chat.completion.chunk",
    created: nowSeconds(),
  };
  const pending: GeneratedToken[][] = Array.from({ length: n }, () => []);
  const chunk = (index: number, delta: Record<string, unknown>, finish: FinishReason | null) => {
    const choice: Record<string, unknown> = { index, delta, logprobs: null, finish_reason: finish };
    if (opts.logprobs && pending[index].length > 0) {
      choice.logprobs = { content: chatLogprobs(pending[index], opts.tokensAsIds) };
      pending[index] = [];
    }
    sse.data({ ...base, model: opts.model, choices: [choice] });
  };

  (async () => {
    for (let i = 0; i < n; i++) chunk(i, { role: "assistant" }, null);
    const calls: ToolCallOut[][] = Array.from({ length: n }, () => []);
    const open = new Set(calls.keys());
    const usage = new UsageTotal();
    let last: FinishReason | null = null;
    try {
      for await (const e of gen.events) {
        const i = choiceOf(e);
        if (!open.has(i)) continue;
        if (e.type === "delta") {
          pending[i].push(...e.tokens);
          if (e.reasoning) {
            chunk(i, { reasoning_content: e.reasoning, reasoning: e.reasoning }, null);
          }
          if (e.content) chunk(i, { content: e.content }, null);
        } else if (e.type === "tool_call") {
          calls[i].push(toolCall(e));
        } else if (e.type === "done") {
          // Cut short, the stream still ends as every stream does: finish, usage, [DONE].
          if (e.fault && (last === null || !cutShort(last))) {
            streamFault(sse, e.fault.code, e.fault.message);
          }
          calls[i].forEach((c, index) => chunk(i, { tool_calls: [{ index, ...c }] }, null));
          chunk(i, {}, e.finishReason);
          open.delete(i);
          usage.add(e.usage);
          last = e.finishReason;
        }
      }
      if (last !== null) {
        // A generation cut short as a whole (its worker gone) ends the choices it left open.
        for (const i of open) chunk(i, {}, last);
        sse.data({ ...base, model: opts.model, choices: [], usage: chatUsage(usage.counts) });
        sse.done();
      }
    } catch (err) {
      streamError(sse, "internal_error", errorMessage(err));
    } finally {
      sse.close();
    }
  })();
  return sseResponse(sse);
}
