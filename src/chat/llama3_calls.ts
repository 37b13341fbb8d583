/**
 * Llama 3.1 / 3.2 / 3.3 tool calls, in the forms Meta documents and llama.cpp reads:
 * - JSON, as the whole answer: `{"name": "f", "parameters": {...}}` (`"arguments"` is
 *   taken too, and an optional `"type": "function"`), several separated by `;`. Only at the
 *   start of the output: a JSON object later in an answer is the answer's text.
 * - After `<|python_tag|>` (a control token, shown to this reader only), to the end of the
 *   output (`<|eom_id|>` ends it, and ends generation): JSON calls as above, a built-in
 *   tool's `name.call(key=value, ...)`, or, when the request offers a code interpreter, the
 *   code to run.
 * Anything else is content.
 */

import type { ChatTool } from "./messages.ts";
import { isJsonObject, jsonEnd, JsonExtent, jsonValueEnd, tryParseJson } from "./json_extent.ts";
import { endOfText, partialTagLength } from "./tags.ts";
import { CallContent, type OutputEvent, type ToolCallScanner } from "./tool_call_scanner.ts";
import type { ParsedToolCall } from "./tool_calls.ts";

export const PYTHON_TAG = "<|python_tag|>";

/** Tools that take raw code after `<|python_tag|>`, by preference. */
const CODE_TOOLS = ["code_interpreter", "python"];

type State = "start" | "json" | "between" | "content" | "python";

export class Llama3Calls implements ToolCallScanner {
  readonly #codeTool: string | undefined;
  readonly #out = new CallContent();
  #state: State = "start";
  #buffer = "";
  #json: JsonExtent | null = null;
  // Whitespace before a call: dropped if the call is valid, else content.
  #held = "";

  constructor(tools: readonly ChatTool[] = []) {
    this.#codeTool = CODE_TOOLS.find((name) => tools.some((t) => t.function.name === name));
  }

  push(text: string, events: OutputEvent[], final: boolean): void {
    this.#buffer += text;
    for (;;) {
      const buf = this.#buffer;
      switch (this.#state) {
        case "start": {
          const trimmed = buf.trimStart();
          if (trimmed === "" && !final) return;
          if (trimmed.startsWith("{")) {
            this.#openJson(buf.slice(0, buf.length - trimmed.length), trimmed);
          } else this.#state = "content";
          continue;
        }
        case "json": {
          const end = this.#json!.scan(buf);
          if (end < 0) {
            if (final) this.#notCall(events, this.#held + buf, "");
            return;
          }
          const call = jsonCall(tryParseJson(buf.slice(0, end)));
          if (call === null) {
            this.#notCall(events, this.#held + buf.slice(0, end), buf.slice(end));
            continue;
          }
          this.#held = "";
          this.#out.call(events, call);
          this.#buffer = buf.slice(end);
          this.#state = "between";
          continue;
        }
        case "between": {
          const trimmed = buf.trimStart();
          if (trimmed.startsWith(";")) {
            this.#buffer = trimmed.slice(1);
          } else if (trimmed.startsWith("{")) {
            this.#openJson("", trimmed);
          } else if (trimmed !== "") {
            this.#state = "content";
            this.#buffer = trimmed;
          } else {
            if (final) this.#buffer = "";
            return;
          }
          continue;
        }
        case "content": {
          const tag = buf.indexOf(PYTHON_TAG);
          if (tag >= 0) {
            const before = buf.slice(0, tag);
            const cut = endOfText(before);
            this.#out.text(events, before.slice(0, cut));
            this.#held = this.#out.afterCall ? "" : before.slice(cut);
            this.#buffer = buf.slice(tag + PYTHON_TAG.length);
            this.#state = "python";
            continue;
          }
          if (final) {
            this.#out.text(events, buf);
            this.#buffer = "";
            return;
          }
          // Hold a possible partial `<|python_tag|>` and the whitespace before it.
          const cut = endOfText(buf.slice(0, buf.length - partialTagLength(buf, PYTHON_TAG)));
          this.#out.text(events, buf.slice(0, cut));
          this.#buffer = buf.slice(cut);
          return;
        }
        case "python": {
          if (!final) return;
          const calls = pythonTagCalls(buf, this.#codeTool);
          if (calls === null) this.#out.text(events, this.#held + PYTHON_TAG + buf);
          else for (const call of calls) this.#out.call(events, call);
          this.#held = "";
          this.#buffer = "";
          return;
        }
      }
    }
  }

  #openJson(whitespace: string, text: string): void {
    this.#held = this.#out.afterCall ? "" : whitespace;
    this.#buffer = text;
    this.#json = new JsonExtent();
    this.#state = "json";
  }

  /** `text` turned out not to be a call: it is content, and `rest` is read on as content. */
  #notCall(events: OutputEvent[], text: string, rest: string): void {
    this.#out.text(events, text);
    this.#held = "";
    this.#json = null;
    this.#buffer = rest;
    this.#state = "content";
  }
}

/** A JSON call object, or null. */
function jsonCall(value: unknown): ParsedToolCall | null {
  if (!isJsonObject(value)) return null;
  const { name, type, parameters, arguments: args, ...extra } = value;
  if (typeof name !== "string" || name === "") return null;
  if ((type !== undefined && type !== "function") || Object.keys(extra).length > 0) return null;
  if (parameters !== undefined && args !== undefined) return null;
  const given = parameters ?? args;
  if (given === undefined) return { name, arguments: "{}" };
  const object = typeof given === "string" ? tryParseJson(given) : given;
  if (!isJsonObject(object)) return null;
  return { name, arguments: typeof given === "string" ? given : JSON.stringify(given) };
}

/** The calls written after `<|python_tag|>`, or null when it is none of the known forms. */
function pythonTagCalls(body: string, codeTool: string | undefined): ParsedToolCall[] | null {
  const text = body.trim();
  if (text.startsWith("{")) return jsonCalls(text);
  const builtin = builtinCall(text);
  if (builtin !== null) return [builtin];
  if (codeTool !== undefined && text !== "") {
    return [{ name: codeTool, arguments: JSON.stringify({ code: text }) }];
  }
  return null;
}

/** One or more JSON calls separated by `;` and whitespace, and nothing else. */
function jsonCalls(text: string): ParsedToolCall[] | null {
  const calls: ParsedToolCall[] = [];
  let at = 0;
  while (at < text.length) {
    const end = jsonEnd(text, at);
    if (end < 0) return null;
    const call = jsonCall(tryParseJson(text.slice(at, end)));
    if (call === null) return null;
    calls.push(call);
    const next = /\s*;?\s*/y;
    next.lastIndex = end;
    next.exec(text);
    at = next.lastIndex;
    if (at < text.length && text[at] !== "{") return null;
  }
  return calls;
}

const BUILTIN_CALL = /^([A-Za-z_]\w*)\.call\(([\s\S]*)\)$/;
const KEY = /\s*([A-Za-z_]\w*)\s*=\s*/y;
const SEPARATOR = /\s*(,|$)/y;

/** `name.call(key=value, ...)`, each value JSON, as Llama writes built-in tool calls. */
function builtinCall(text: string): ParsedToolCall | null {
  const m = BUILTIN_CALL.exec(text);
  if (m === null) return null;
  const inner = m[2];
  const args: Record<string, unknown> = {};
  let at = 0;
  while (inner.slice(at).trim() !== "") {
    KEY.lastIndex = at;
    const key = KEY.exec(inner);
    if (key === null) return null;
    const end = jsonValueEnd(inner, KEY.lastIndex);
    if (end < 0) return null;
    const value = tryParseJson(inner.slice(KEY.lastIndex, end));
    if (value === undefined) return null;
    args[key[1]] = value;
    SEPARATOR.lastIndex = end;
    if (SEPARATOR.exec(inner) === null) return null;
    at = SEPARATOR.lastIndex;
  }
  return { name: m[1], arguments: JSON.stringify(args) };
}
