/**
 * Streaming split of model output into reasoning and the rest, for `<think>…</think>`
 * models (Qwen3). Reasoning is the text inside the block, trimmed; the block is recognised
 * only at the start of the output (after optional whitespace), or is already open when the
 * prompt opened it (`startInReasoning`). Whitespace after `</think>` is dropped. A tag split
 * across pieces is held back until it is complete or can no longer be a tag.
 */

import { endOfText, partialTagLength, pushText, type TextEvent } from "./tags.ts";

export const THINK_OPEN = "<think>";
export const THINK_CLOSE = "</think>";

type State = "start" | "reasoning" | "after" | "content";

/**
 * Whether a rendered prompt ends inside an open `<think>` block (templates of thinking-only
 * models open it for the model), so the output starts as reasoning.
 */
export function promptOpensReasoning(prompt: string): boolean {
  const open = prompt.lastIndexOf(THINK_OPEN);
  return open >= 0 && !prompt.includes(THINK_CLOSE, open);
}

export class ReasoningSplitter {
  #state: State;
  #buffer = "";
  // Reasoning text emitted so far is non-empty, so leading whitespace is no longer trimmed.
  #reasoningStarted = false;
  // When the prompt opened the block, an explicit `<think>` may still be repeated first.
  #mayRepeatOpen: boolean;

  constructor(options: { startInReasoning?: boolean } = {}) {
    this.#state = options.startInReasoning ? "reasoning" : "start";
    this.#mayRepeatOpen = options.startInReasoning ?? false;
  }

  /** True while the text being produced is reasoning. */
  get inReasoning(): boolean {
    return this.#state === "reasoning";
  }

  push(piece: string, events: TextEvent[]): void {
    this.#buffer += piece;
    this.#drain(events, false);
  }

  finish(events: TextEvent[]): void {
    this.#drain(events, true);
  }

  #drain(events: TextEvent[], final: boolean): void {
    for (;;) {
      const buf = this.#buffer;
      switch (this.#state) {
        case "start": {
          const trimmed = buf.trimStart();
          if (trimmed.startsWith(THINK_OPEN)) {
            this.#state = "reasoning";
            this.#buffer = trimmed.slice(THINK_OPEN.length);
            continue;
          }
          if (!final && (trimmed === "" || THINK_OPEN.startsWith(trimmed))) return;
          this.#state = "content";
          continue;
        }
        case "reasoning": {
          if (this.#mayRepeatOpen) {
            const trimmed = buf.trimStart();
            if (trimmed.startsWith(THINK_OPEN)) {
              this.#buffer = trimmed.slice(THINK_OPEN.length);
              this.#mayRepeatOpen = false;
              continue;
            }
            if (!final && (trimmed === "" || THINK_OPEN.startsWith(trimmed))) return;
            this.#mayRepeatOpen = false;
          }
          const close = buf.indexOf(THINK_CLOSE);
          if (close >= 0) {
            this.#emitReasoning(buf.slice(0, endOfText(buf.slice(0, close))), events);
            this.#buffer = buf.slice(close + THINK_CLOSE.length);
            this.#state = "after";
            continue;
          }
          if (final) {
            this.#emitReasoning(buf.trimEnd(), events);
            this.#buffer = "";
            return;
          }
          // Hold back a possible partial `</think>` and trailing whitespace, which is
          // dropped if the block ends right after it.
          const safe = buf.length - partialTagLength(buf, THINK_CLOSE);
          const cut = endOfText(buf.slice(0, safe));
          this.#emitReasoning(buf.slice(0, cut), events);
          this.#buffer = buf.slice(cut);
          return;
        }
        case "after": {
          const trimmed = buf.trimStart();
          this.#buffer = trimmed;
          if (trimmed === "") return;
          this.#state = "content";
          continue;
        }
        case "content":
          pushText(events, "content", buf);
          this.#buffer = "";
          return;
      }
    }
  }

  #emitReasoning(text: string, events: TextEvent[]): void {
    const out = this.#reasoningStarted ? text : text.trimStart();
    if (out === "") return;
    this.#reasoningStarted = true;
    pushText(events, "reasoning", out);
  }
}
