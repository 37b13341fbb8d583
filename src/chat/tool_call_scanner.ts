/**
 * What every tool-call syntax's streaming reader shares: the events it yields and how it
 * treats the text around a call. Whitespace next to a call is not content; text that only
 * looked like a call (bad JSON, an unknown form, never finished) is content, markers and
 * all. However the output is cut into pieces, a reader's events add up to the same result.
 */

import { pushText, type TextEvent } from "./tags.ts";
import type { ParsedToolCall } from "./tool_calls.ts";

export type OutputEvent = TextEvent | { kind: "tool_call"; call: ParsedToolCall };

/** Reads the tool calls of one syntax out of the content of an output. */
export interface ToolCallScanner {
  /** Feeds content text; appends what became certain. `final`: the output has ended. */
  push(text: string, events: OutputEvent[], final: boolean): void;
}

/** Emits content and calls, dropping the whitespace that follows a call. */
export class CallContent {
  #afterCall = false;

  /** True until content follows the last call: whitespace before a next call is dropped. */
  get afterCall(): boolean {
    return this.#afterCall;
  }

  text(events: OutputEvent[], text: string): void {
    const out = this.#afterCall ? text.trimStart() : text;
    if (out === "") return;
    this.#afterCall = false;
    pushText(events, "content", out);
  }

  call(events: OutputEvent[], call: ParsedToolCall): void {
    events.push({ kind: "tool_call", call });
    this.#afterCall = true;
  }
}
