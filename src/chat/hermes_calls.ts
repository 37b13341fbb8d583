/**
 * Hermes tool calls (Qwen2.5, Qwen3, Hermes 2/3): `<tool_call>…</tool_call>` blocks in the
 * content, each a JSON call or a Qwen3-Coder XML call (tool_calls.ts reads the body).
 */

import type { ChatTool } from "./messages.ts";
import { endOfText, partialTagLength } from "./tags.ts";
import { CallContent, type OutputEvent, type ToolCallScanner } from "./tool_call_scanner.ts";
import { parseToolCallBody, TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "./tool_calls.ts";

export class HermesCalls implements ToolCallScanner {
  readonly #tools: readonly ChatTool[];
  readonly #out = new CallContent();
  // Content held back: trailing whitespace and a possible partial `<tool_call>`.
  #buffer = "";
  #inCall = false;
  // The body of the call being read, and its last characters (a partial closing tag).
  #callParts: string[] = [];
  #callTail = "";
  // Whitespace held before a `<tool_call>`: dropped if the call is valid, else content.
  #heldWhitespace = "";

  constructor(tools: readonly ChatTool[] = []) {
    this.#tools = tools;
  }

  push(text: string, events: OutputEvent[], final: boolean): void {
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
            this.#out.text(events, this.#heldWhitespace + TOOL_CALL_OPEN + body);
            this.#heldWhitespace = "";
          }
          return;
        }
        const body = this.#callParts.join("") + window.slice(0, close);
        this.#endCall();
        rest = window.slice(close + TOOL_CALL_CLOSE.length);
        const call = parseToolCallBody(body, this.#tools);
        if (call === null) {
          this.#out.text(events, this.#heldWhitespace + TOOL_CALL_OPEN + body + TOOL_CALL_CLOSE);
        } else {
          this.#out.call(events, call);
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
        this.#out.text(events, before.slice(0, cut));
        this.#heldWhitespace = this.#out.afterCall ? "" : before.slice(cut);
        this.#inCall = true;
        rest = buf.slice(open + TOOL_CALL_OPEN.length);
        continue;
      }
      if (final) {
        this.#out.text(events, buf);
        return;
      }
      // Hold a possible partial `<tool_call>` and the whitespace before it.
      const cut = endOfText(buf.slice(0, buf.length - partialTagLength(buf, TOOL_CALL_OPEN)));
      this.#out.text(events, buf.slice(0, cut));
      this.#buffer = buf.slice(cut);
      return;
    }
  }

  #endCall(): void {
    this.#inCall = false;
    this.#callParts = [];
    this.#callTail = "";
  }
}
