/**
 * Responses API answers. One builder turns generation events into output items (reasoning,
 * message, function_call) and, when streaming, into the API's named events: created,
 * in_progress, output_item.added, *.delta, *.done, output_item.done, then completed
 * (or incomplete when the token limit was reached).
 */

import { errorMessage } from "../common/errors.ts";
import { cutShort, endedEarly, unfinished } from "./errors.ts";
import type { FinishReason, Generation, UsageCounts } from "./generation.ts";
import { nowSeconds, randomId } from "./ids.ts";
import type { ResponsesRequest } from "./responses_request.ts";
import { SseChannel, sseResponse } from "./sse.ts";
import { responsesUsage } from "./usage.ts";

type Emit = (type: string, payload: Record<string, unknown>) => void;
type Item = Record<string, unknown> & { id: string; type: string };

class ResponseBuilder {
  readonly id = randomId("resp_");
  readonly createdAt = nowSeconds();
  readonly output: Item[] = [];
  #open: { item: Item; kind: "reasoning" | "message"; text: string } | null = null;

  constructor(
    readonly model: string,
    readonly echo: ResponsesRequest["echo"],
    readonly emit: Emit,
  ) {}

  snapshot(
    status: "in_progress" | "completed" | "incomplete" | "failed",
    extra: Record<string, unknown> = {},
  ): Record<string, unknown> {
    return {
      id: this.id,
      object: "response",
      created_at: this.createdAt,
      status,
      error: null,
      incomplete_details: null,
      instructions: this.echo.instructions,
      max_output_tokens: this.echo.max_output_tokens,
      model: this.model,
      output: status === "in_progress" ? [] : this.output,
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      store: false,
      temperature: this.echo.temperature,
      text: { format: { type: "text" } },
      tool_choice: this.echo.tool_choice,
      tools: this.echo.tools,
      top_p: this.echo.top_p,
      truncation: "disabled",
      usage: null,
      user: null,
      metadata: this.echo.metadata,
      ...extra,
    };
  }

  text(kind: "reasoning" | "message", delta: string): void {
    if (this.#open?.kind !== kind) this.#openItem(kind);
    const open = this.#open!;
    open.text += delta;
    const at = { item_id: open.item.id, output_index: this.output.length - 1, content_index: 0 };
    if (kind === "reasoning") this.emit("response.reasoning_text.delta", { ...at, delta });
    else this.emit("response.output_text.delta", { ...at, delta, logprobs: [] });
  }

  toolCall(name: string, args: string, callId?: string): void {
    this.#closeItem();
    const item: Item = {
      id: randomId("fc_"),
      type: "function_call",
      status: "in_progress",
      call_id: callId ?? randomId("call_"),
      name,
      arguments: "",
    };
    this.output.push(item);
    const output_index = this.output.length - 1;
    this.emit("response.output_item.added", { output_index, item: { ...item } });
    this.emit("response.function_call_arguments.delta", {
      item_id: item.id,
      output_index,
      delta: args,
    });
    this.emit("response.function_call_arguments.done", {
      item_id: item.id,
      output_index,
      arguments: args,
    });
    item.arguments = args;
    item.status = "completed";
    this.emit("response.output_item.done", { output_index, item });
  }

  /** Closes the last item; returns the final response object. */
  finish(reason: FinishReason, usage: UsageCounts): Record<string, unknown> {
    const incomplete = reason === "length";
    // OpenAI marks the message the token limit cut `incomplete`, as the response is.
    this.#closeItem(incomplete ? "incomplete" : "completed");
    return this.snapshot(incomplete ? "incomplete" : "completed", {
      incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
      usage: responsesUsage(usage),
    });
  }

  /**
   * The response of a generation the node cut short, with the usage so far: `failed` with
   * the error, or `incomplete` (reason: why the node stopped it) when it was cancelled.
   */
  stopped(
    reason: FinishReason,
    usage: UsageCounts,
    fault: { code: string; message: string },
  ): Record<string, unknown> {
    if (reason === "error") {
      return this.snapshot("failed", { error: fault, usage: responsesUsage(usage) });
    }
    return this.snapshot("incomplete", {
      incomplete_details: { reason: fault.code },
      usage: responsesUsage(usage),
    });
  }

  #openItem(kind: "reasoning" | "message"): void {
    this.#closeItem();
    const item: Item = kind === "reasoning"
      ? { id: randomId("rs_"), type: "reasoning", summary: [], content: [] }
      : {
        id: randomId("msg_"),
        type: "message",
        status: "in_progress",
        role: "assistant",
        content: [],
      };
    this.output.push(item);
    this.#open = { item, kind, text: "" };
    const output_index = this.output.length - 1;
    this.emit("response.output_item.added", { output_index, item: { ...item, content: [] } });
    if (kind === "message") {
      this.emit("response.content_part.added", {
        item_id: item.id,
        output_index,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] },
      });
    }
  }

  #closeItem(status: "completed" | "incomplete" = "completed"): void {
    const open = this.#open;
    if (!open) return;
    this.#open = null;
    const at = { item_id: open.item.id, output_index: this.output.length - 1, content_index: 0 };
    if (open.kind === "reasoning") {
      open.item.content = [{ type: "reasoning_text", text: open.text }];
      this.emit("response.reasoning_text.done", { ...at, text: open.text });
    } else {
      const part = { type: "output_text", text: open.text, annotations: [], logprobs: [] };
      open.item.content = [part];
      open.item.status = status;
      this.emit("response.output_text.done", { ...at, text: open.text, logprobs: [] });
      this.emit("response.content_part.done", { ...at, part });
    }
    this.emit("response.output_item.done", { output_index: at.output_index, item: open.item });
  }
}

export interface ResponsesRenderOptions {
  model: string;
  echo: ResponsesRequest["echo"];
  keepAliveMs?: number;
}

export async function response(
  gen: Generation,
  opts: ResponsesRenderOptions,
): Promise<Record<string, unknown>> {
  const b = new ResponseBuilder(opts.model, opts.echo, () => {});
  let final: Record<string, unknown> | null = null;
  for await (const e of gen.events) {
    if (e.type === "delta") {
      if (e.reasoning) b.text("reasoning", e.reasoning);
      if (e.content) b.text("message", e.content);
    } else if (e.type === "tool_call") {
      b.toolCall(e.name, e.arguments, e.id);
    } else if (e.type === "done") {
      if (cutShort(e.finishReason)) throw unfinished(e);
      final = b.finish(e.finishReason, e.usage);
    }
  }
  if (final === null) throw endedEarly();
  return final;
}

export function streamResponse(gen: Generation, opts: ResponsesRenderOptions): Response {
  const sse = new SseChannel(() => gen.cancel(), opts.keepAliveMs);
  let seq = 0;
  const emit: Emit = (type, payload) =>
    sse.event(type, { type, sequence_number: seq++, ...payload });
  const b = new ResponseBuilder(opts.model, opts.echo, emit);
  (async () => {
    emit("response.created", { response: b.snapshot("in_progress") });
    emit("response.in_progress", { response: b.snapshot("in_progress") });
    try {
      for await (const e of gen.events) {
        if (e.type === "delta") {
          if (e.reasoning) b.text("reasoning", e.reasoning);
          if (e.content) b.text("message", e.content);
        } else if (e.type === "tool_call") {
          b.toolCall(e.name, e.arguments, e.id);
        } else if (e.type !== "done") {
          continue;
        } else if (cutShort(e.finishReason)) {
          const fault = e.fault ??
            { code: "request_cancelled", message: "the generation was stopped" };
          const cut = b.stopped(e.finishReason, e.usage, fault);
          emit("error", { ...fault, param: null });
          emit(cut.status === "failed" ? "response.failed" : "response.incomplete", {
            response: cut,
          });
        } else {
          const final = b.finish(e.finishReason, e.usage);
          emit(final.status === "incomplete" ? "response.incomplete" : "response.completed", {
            response: final,
          });
        }
      }
    } catch (err) {
      fail("internal_error", errorMessage(err));
    } finally {
      sse.close();
    }
  })();
  function fail(code: string, message: string): void {
    emit("error", { code, message, param: null });
    emit("response.failed", { response: b.snapshot("failed", { error: { code, message } }) });
  }
  return sseResponse(sse);
}
