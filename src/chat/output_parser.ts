/**
 * The streaming parser of a model's output: fed one decoded piece at a time, it emits
 * reasoning text, content text and complete tool calls. Reasoning is split off first
 * (reasoning.ts); the rest is scanned for `<tool_call>…</tool_call>` blocks when tool
 * calling is on. Whitespace around tool calls is not content. A block that is not a valid
 * call (bad JSON, unknown form, never closed) is passed through as content, tags and all.
 * However the output is cut into pieces, the events add up to the same result.
 */

import type { ChatTool } from "./messages.ts";
import { ReasoningSplitter } from "./reasoning.ts";
import { endOfText, partialTagLength, pushText, type TextEvent } from "./tags.ts";
import {
  type ParsedToolCall,
  parseToolCallBody,
  TOOL_CALL_CLOSE,
  TOOL_CALL_OPEN,
} from "./tool_calls.ts";

export type OutputEvent = TextEvent | { kind: "tool_call"; call: ParsedToolCall };

export interface OutputParserOptions {
  /** Split `<think>…</think>` into reasoning (default true). */
  reasoning?: boolean;
  /** The prompt already opened `<think>`: output starts as reasoning. */
  startInReasoning?: boolean;
  /** Extract `<tool_call>` blocks (default false: the request had no tools). */
  toolCalls?: boolean;
  /** The request's tools; lets XML parameters declared as strings stay strings. */
  tools?: readonly ChatTool[];
}

/** A whole output, parsed. */
export interface ParsedOutput {
  reasoning: string;
  content: string;
  toolCalls: ParsedToolCall[];
}

export class OutputParser {
  readonly #reasoning: ReasoningSplitter | null;
  readonly #toolCalls: boolean;
  readonly #tools: readonly ChatTool[];
  // Content held back: trailing whitespace and a possible partial `<tool_call>`.
  #buffer = "";
  #inCall = false;
  // The body of the call being read, and its last characters (a partial closing tag).
  #callParts: string[] = [];
  #callTail = "";
  // Whitespace held before a `<tool_call>`: dropped if the call is valid, else content.
  #heldWhitespace = "";
  // A tool call just ended and no content followed yet, so leading whitespace is dropped.
  #afterCall = false;

  constructor(options: OutputParserOptions = {}) {
    this.#reasoning = options.reasoning === false
      ? null
      : new ReasoningSplitter({ startInReasoning: options.startInReasoning });
    this.#toolCalls = options.toolCalls ?? false;
    this.#tools = options.tools ?? [];
  }

  /** True while the model is producing reasoning. */
  get inReasoning(): boolean {
    return this.#reasoning?.inReasoning ?? false;
  }

  /** Feeds one piece of decoded output; returns what became certain. */
  push(piece: string): OutputEvent[] {
    return this.#route(piece, false);
  }

  /** Ends the output; returns everything still held back. */
  finish(): OutputEvent[] {
    return this.#route("", true);
  }

  #route(piece: string, final: boolean): OutputEvent[] {
    const split: TextEvent[] = [];
    if (this.#reasoning === null) pushText(split, "content", piece);
    else if (final) this.#reasoning.finish(split);
    else this.#reasoning.push(piece, split);

    const events: OutputEvent[] = [];
    for (const event of split) {
      if (event.kind === "reasoning") events.push(event);
      else this.#content(event.text, events, false);
    }
    if (final) this.#content("", events, true);
    return events;
  }

  #content(text: string, events: OutputEvent[], final: boolean): void {
    if (!this.#toolCalls) {
      pushText(events, "content", text);
      return;
    }
    let rest = text;
    for (;;) {
      if (this.#inCall) {
        // Only the new text and the few characters before it can hold the closing tag, so
        // a long call costs linear time however finely it is streamed.
        const window = this.#callTail + rest;
        rest = "";
        const close = window.indexOf(TOOL_CALL_CLOSE);
        if (close < 0) {
          const keep = Math.min(window.length, TOOL_CALL_CLOSE.length - 1);
          this.#callParts.push(window.slice(0, window.length - keep));
          this.#callTail = window.slice(window.length - keep);
          if (final) {
            const body = this.#callParts.join("") + this.#callTail;
            this.#endCall();
            this.#emit(events, this.#heldWhitespace + TOOL_CALL_OPEN + body);
            this.#heldWhitespace = "";
          }
          return;
        }
        const body = this.#callParts.join("") + window.slice(0, close);
        this.#endCall();
        rest = window.slice(close + TOOL_CALL_CLOSE.length);
        const call = parseToolCallBody(body, this.#tools);
        if (call === null) {
          this.#emit(events, this.#heldWhitespace + TOOL_CALL_OPEN + body + TOOL_CALL_CLOSE);
        } else {
          events.push({ kind: "tool_call", call });
          this.#afterCall = true;
        }
        this.#heldWhitespace = "";
        continue;
      }
      const buf = this.#buffer + rest;
      rest = "";
      this.#buffer = "";
      const open = buf.indexOf(TOOL_CALL_OPEN);
      if (open >= 0) {
        const before = buf.slice(0, open);
        const cut = endOfText(before);
        this.#emit(events, before.slice(0, cut));
        this.#heldWhitespace = this.#afterCall ? "" : before.slice(cut);
        this.#inCall = true;
        rest = buf.slice(open + TOOL_CALL_OPEN.length);
        continue;
      }
      if (final) {
        this.#emit(events, buf);
        return;
      }
      // Hold a possible partial `<tool_call>` and the whitespace before it.
      const cut = endOfText(buf.slice(0, buf.length - partialTagLength(buf, TOOL_CALL_OPEN)));
      this.#emit(events, buf.slice(0, cut));
      this.#buffer = buf.slice(cut);
      return;
    }
  }

  #endCall(): void {
    this.#inCall = false;
    this.#callParts = [];
    this.#callTail = "";
  }

  #emit(events: OutputEvent[], text: string): void {
    const out = this.#afterCall ? text.trimStart() : text;
    if (out === "") return;
    this.#afterCall = false;
    pushText(events, "content", out);
  }
}

/** Parses a complete output at once (the non-streaming path). */
export function parseOutput(text: string, options: OutputParserOptions = {}): ParsedOutput {
  const parser = new OutputParser(options);
  return collect([...parser.push(text), ...parser.finish()]);
}

/** Folds events into one result. */
export function collect(events: readonly OutputEvent[]): ParsedOutput {
  const out: ParsedOutput = { reasoning: "", content: "", toolCalls: [] };
  for (const e of events) {
    if (e.kind === "tool_call") out.toolCalls.push(e.call);
    else if (e.kind === "reasoning") out.reasoning += e.text;
    else out.content += e.text;
  }
  return out;
}
