/**
 * Legacy completions answers: the `text_completion` object, or its stream (text chunks,
 * a finish chunk per choice, the usage chunk, `[DONE]`). With `echo` a choice's text and
 * log-probs start with the prompt's (the first prompt token's log-prob is null), what
 * evaluation harnesses score with; `n` choices are indexed in order.
 */

import { errorMessage } from "../common/errors.ts";
import { choiceOf, UsageTotal } from "./choices.ts";
import { cutShort, endedEarly, unfinished } from "./errors.ts";
import type { FinishReason, GeneratedToken, Generation } from "./generation.ts";
import { nowSeconds, randomId } from "./ids.ts";
import { type CompletionLogprobs, completionLogprobs } from "./logprobs.ts";
import { SseChannel, sseResponse, streamError, streamFault } from "./sse.ts";
import { chatUsage } from "./usage.ts";

export interface CompletionRenderOptions {
  model: string;
  /** Alternatives per token; null = no log-probs. */
  logprobs: number | null;
  tokensAsIds: boolean;
  /** Choices the generation makes (default 1). */
  n?: number;
  keepAliveMs?: number;
}

/** Text of a delta: completions have no reasoning or tool calls, so all of it is text. */
function textOf(e: { reasoning?: string; content?: string }): string {
  return (e.reasoning ?? "") + (e.content ?? "");
}

interface ChoiceState {
  text: string;
  /** The echoed prompt's tokens (those after the first scored), then the generated ones. */
  tokens: GeneratedToken[];
  /** How many of `tokens` are the prompt's. */
  promptTokens: number;
  finish: FinishReason | null;
}

function logprobsOf(
  c: { tokens: GeneratedToken[]; promptTokens: number },
  opts: CompletionRenderOptions,
  offset: number,
): CompletionLogprobs | null {
  if (opts.logprobs === null) return null;
  return completionLogprobs(c.tokens, opts.logprobs > 0, opts.tokensAsIds, offset, c.promptTokens);
}

export async function completion(
  gen: Generation,
  opts: CompletionRenderOptions,
): Promise<Record<string, unknown>> {
  const id = randomId("cmpl-");
  const created = nowSeconds();
  const choices = Array.from({ length: opts.n ?? 1 }, (): ChoiceState => ({
    text: "",
    tokens: [],
    promptTokens: 0,
    finish: null,
  }));
  const usage = new UsageTotal();
  for await (const e of gen.events) {
    const c = choices[choiceOf(e)];
    if (c === undefined) continue;
    if (e.type === "prompt") {
      c.text = e.text + c.text;
      c.tokens.unshift(...e.tokens);
      c.promptTokens = e.tokens.length;
    } else if (e.type === "delta") {
      c.text += textOf(e);
      c.tokens.push(...e.tokens);
    } else if (e.type === "done") {
      if (cutShort(e.finishReason)) throw unfinished(e);
      c.finish = e.finishReason;
      usage.add(e.usage);
    }
  }
  if (choices.some((c) => c.finish === null)) throw endedEarly();
  return {
    id,
    object: "text_completion",
    created,
    model: opts.model,
    choices: choices.map((c, index) => ({
      index,
      text: c.text,
      logprobs: logprobsOf(c, opts, 0),
      finish_reason: c.finish,
    })),
    usage: chatUsage(usage.counts),
  };
}

export function streamCompletion(gen: Generation, opts: CompletionRenderOptions): Response {
  const sse = new SseChannel(() => gen.cancel(), opts.keepAliveMs);
  const n = opts.n ?? 1;
  const base = { id: randomId("cmpl-"), object: "text_completion", created: nowSeconds() };
  const offset = new Array<number>(n).fill(0);
  const pending: GeneratedToken[][] = Array.from({ length: n }, () => []);
  const chunk = (
    index: number,
    text: string,
    finish: FinishReason | null,
    promptTokens = 0,
  ): void => {
    const logprobs = logprobsOf({ tokens: pending[index], promptTokens }, opts, offset[index]);
    pending[index] = [];
    offset[index] += text.length;
    sse.data({
      ...base,
      model: opts.model,
      choices: [{ index, text, logprobs, finish_reason: finish }],
    });
  };
  (async () => {
    const open = new Set(pending.keys());
    const usage = new UsageTotal();
    let last: FinishReason | null = null;
    try {
      for await (const e of gen.events) {
        const i = choiceOf(e);
        if (!open.has(i)) continue;
        if (e.type === "prompt") {
          pending[i].push(...e.tokens);
          chunk(i, e.text, null, e.tokens.length);
        } else if (e.type === "delta") {
          pending[i].push(...e.tokens);
          const text = textOf(e);
          if (text) chunk(i, text, null);
        } else if (e.type === "done") {
          // Cut short, the stream still ends as every stream does: finish, usage, [DONE].
          if (e.fault && (last === null || !cutShort(last))) {
            streamFault(sse, e.fault.code, e.fault.message);
          }
          chunk(i, "", e.finishReason);
          open.delete(i);
          usage.add(e.usage);
          last = e.finishReason;
        }
      }
      if (last !== null) {
        // A generation cut short as a whole (its worker gone) ends the choices it left open.
        for (const i of open) chunk(i, "", last);
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
