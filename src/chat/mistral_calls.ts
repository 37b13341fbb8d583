/**
 * Mistral tool calls (v0.3 / v3 tokenizer, Nemo): the control token `[TOOL_CALLS]` (shown
 * to this reader only), then a JSON array of `{"name", "arguments"[, "id"]}`; a single
 * object is taken too. Text before the marker is content. Mistral's templates take a call
 * back only with an `id` of 9 letters and digits, so a call the model wrote without a
 * usable one gets one from `newMistralCallId`.
 */

import { isJsonObject, JsonExtent, tryParseJson } from "./json_extent.ts";
import { endOfText, partialTagLength } from "./tags.ts";
import { CallContent, type OutputEvent, type ToolCallScanner } from "./tool_call_scanner.ts";
import type { ParsedToolCall } from "./tool_calls.ts";

export const TOOL_CALLS = "[TOOL_CALLS]";

const MISTRAL_ID = /^[A-Za-z0-9]{9}$/;
const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** A random call id of the form Mistral's templates require. */
export function newMistralCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  let id = "";
  for (const b of bytes) id += ALPHANUMERIC[b % ALPHANUMERIC.length];
  return id;
}

export class MistralCalls implements ToolCallScanner {
  readonly #out = new CallContent();
  #inCalls = false;
  #buffer = "";
  #json: JsonExtent | null = null;
  // Whitespace before the marker: dropped if the calls are valid, else content.
  #held = "";

  push(text: string, events: OutputEvent[], final: boolean): void {
    this.#buffer += text;
    for (;;) {
      const buf = this.#buffer;
      if (!this.#inCalls) {
        const marker = buf.indexOf(TOOL_CALLS);
        if (marker >= 0) {
          const before = buf.slice(0, marker);
          const cut = endOfText(before);
          this.#out.text(events, before.slice(0, cut));
          this.#held = this.#out.afterCall ? "" : before.slice(cut);
          this.#buffer = buf.slice(marker + TOOL_CALLS.length);
          this.#inCalls = true;
          continue;
        }
        if (final) {
          this.#out.text(events, buf);
          this.#buffer = "";
          return;
        }
        // Hold a possible partial marker and the whitespace before it.
        const cut = endOfText(buf.slice(0, buf.length - partialTagLength(buf, TOOL_CALLS)));
        this.#out.text(events, buf.slice(0, cut));
        this.#buffer = buf.slice(cut);
        return;
      }
      if (this.#json === null) {
        const start = buf.length - buf.trimStart().length;
        if (start === buf.length) {
          if (final) this.#notCalls(events, buf.length);
          return;
        }
        if (buf[start] !== "[" && buf[start] !== "{") {
          this.#notCalls(events, start);
          continue;
        }
        this.#json = new JsonExtent(start);
      }
      const end = this.#json.scan(buf);
      if (end < 0) {
        if (final) this.#notCalls(events, buf.length);
        return;
      }
      const calls = mistralCalls(tryParseJson(buf.slice(0, end)));
      if (calls === null) {
        this.#notCalls(events, end);
        continue;
      }
      for (const call of calls) this.#out.call(events, call);
      this.#endCalls(end);
    }
  }

  /** The marker and the first `upTo` characters after it were not calls: content. */
  #notCalls(events: OutputEvent[], upTo: number): void {
    this.#out.text(events, this.#held + TOOL_CALLS + this.#buffer.slice(0, upTo));
    this.#endCalls(upTo);
  }

  #endCalls(upTo: number): void {
    this.#buffer = this.#buffer.slice(upTo);
    this.#held = "";
    this.#json = null;
    this.#inCalls = false;
  }
}

/** The calls of a `[TOOL_CALLS]` payload, or null if any element is not a call. */
function mistralCalls(value: unknown): ParsedToolCall[] | null {
  const items = Array.isArray(value) ? value : [value];
  if (items.length === 0) return null;
  const calls: ParsedToolCall[] = [];
  for (const item of items) {
    if (!isJsonObject(item)) return null;
    const { name, arguments: args, id } = item;
    if (typeof name !== "string" || name === "") return null;
    const object = typeof args === "string" ? tryParseJson(args) : args ?? {};
    if (!isJsonObject(object)) return null;
    calls.push({
      name,
      arguments: typeof args === "string" ? args : JSON.stringify(object),
      ...(typeof id === "string" && MISTRAL_ID.test(id) ? { id } : {}),
    });
  }
  return calls;
}
