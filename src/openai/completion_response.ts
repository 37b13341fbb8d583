/**
 * Legacy completions answers: the `text_completion` object, or its stream (text chunks,
 * a finish chunk, the usage chunk, `[DONE]`).
 */

import { errorMessage } from "../common/errors.ts";
import { cutShort, endedEarly, unfinished } from "./errors.ts";
import type { FinishReason, GeneratedToken, Generation, UsageCounts } from "./generation.ts";
import { nowSeconds, randomId } from "./ids.ts";
import { completionLogprobs } from "./logprobs.ts";
import { SseChannel, sseResponse, streamError, streamFault } from "./sse.ts";
import { chatUsage } from "./usage.ts";

export interface CompletionRenderOptions {
  model: string;
  /** Alternatives per token; null = no log-probs. */
  logprobs: number | null;
  tokensAsIds: boolean;
  keepAliveMs?: number;
}

/** Text of a delta: completions have no reasoning or tool calls, so all of it is text. */
function textOf(e: { reasoning?: string; content?: string }): string {
  return (e.reasoning ?? "") + (e.content ?? "");
}

export async function completion(
  gen: Generation,
  opts: CompletionRenderOptions,
): Promise<Record<string, unknown>> {
  const id = randomId("cmpl-");
  const created = nowSeconds();
  let text = "";
  const tokens: GeneratedToken[] = [];
  let finish: FinishReason = "stop";
  let usage: UsageCounts | null = null;
  for await (const e of gen.events) {
    if (e.type === "delta") {
      text += textOf(e);
      tokens.push(...e.tokens);
    } else if (e.type === "done") {
      if (cutShort(e.finishReason)) throw unfinished(e);
      finish = e.finishReason;
      usage = e.usage;
    }
  }
  if (usage === null) throw endedEarly();
  return {
    id,
    object: "text_completion",
    created,
    model: opts.model,
    choices: [{
      index: 0,
      text,
      logprobs: opts.logprobs === null
        ? null
        : completionLogprobs(tokens, opts.logprobs > 0, opts.tokensAsIds, 0),
      finish_reason: finish,
    }],
    usage: chatUsage(usage),
  };
}

export function streamCompletion(gen: Generation, opts: CompletionRenderOptions): Response {
  const sse = new SseChannel(() => gen.cancel(), opts.keepAliveMs);
  const base = { id: randomId("cmpl-"), object: "text_completion", created: nowSeconds() };
  let offset = 0;
  let pending: GeneratedToken[] = [];
  const chunk = (text: string, finish: FinishReason | null): void => {
    const logprobs = opts.logprobs === null
      ? null
      : completionLogprobs(pending, opts.logprobs > 0, opts.tokensAsIds, offset);
    pending = [];
    offset += text.length;
    sse.data({
      ...base,
      model: opts.model,
      choices: [{ index: 0, text, logprobs, finish_reason: finish }],
    });
  };
  (async () => {
    try {
      for await (const e of gen.events) {
        if (e.type === "delta") {
          pending.push(...e.tokens);
          const text = textOf(e);
          if (text) chunk(text, null);
        } else if (e.type === "done") {
          // Cut short, the stream still ends as every stream does: finish, usage, [DONE].
          if (e.fault) {
            streamFault(sse, e.fault.code, e.fault.message);
          }
          chunk("", e.finishReason);
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
