/**
 * Tool calls in model output, in the two forms Qwen models write inside
 * `<tool_call>…</tool_call>`:
 * - Hermes (Qwen3): `{"name": "f", "arguments": {...}}`
 * - Qwen3-Coder XML: `<function=f><parameter=k>v</parameter>…</function>`, where a value is
 *   JSON when it parses as JSON (and the tool's schema does not declare it a string), else
 *   the raw text without the newline that follows the opening tag and precedes the closing.
 * Either becomes an OpenAI tool call whose `arguments` is a JSON string. A body in neither
 * form yields null, so the caller can keep it as plain content.
 */

import type { ChatTool } from "./messages.ts";

export interface ParsedToolCall {
  name: string;
  /** JSON text of the arguments object. */
  arguments: string;
  /** The call's id, where the model wrote one (Mistral). */
  id?: string;
}

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";

export function parseToolCallBody(
  body: string,
  tools: readonly ChatTool[] = [],
): ParsedToolCall | null {
  const text = body.trim();
  return text.startsWith("<function=") ? parseXmlCall(text, tools) : parseHermesCall(text);
}

function parseHermesCall(text: string): ParsedToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const { name, arguments: args } = value as Record<string, unknown>;
  if (typeof name !== "string" || name === "") return null;
  if (args === undefined) return { name, arguments: "{}" };
  return { name, arguments: typeof args === "string" ? args : JSON.stringify(args) };
}

const FUNCTION_RE = /^<function=([^>\n]+)>([\s\S]*)<\/function>$/;
const PARAMETER_RE = /<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/g;

function parseXmlCall(text: string, tools: readonly ChatTool[]): ParsedToolCall | null {
  const fn = FUNCTION_RE.exec(text);
  if (fn === null) return null;
  const name = fn[1].trim();
  if (name === "") return null;
  const inner = fn[2];
  const properties = tools.find((t) => t.function.name === name)?.function.parameters
    ?.properties as Record<string, { type?: unknown }> | undefined;

  const args: Record<string, unknown> = {};
  let last = 0;
  for (const m of inner.matchAll(PARAMETER_RE)) {
    // Only whitespace may separate parameters; anything else is not this format.
    if (inner.slice(last, m.index).trim() !== "") return null;
    last = m.index + m[0].length;
    let raw = m[2];
    if (raw.startsWith("\n")) raw = raw.slice(1);
    if (raw.endsWith("\n")) raw = raw.slice(0, -1);
    args[m[1].trim()] = parameterValue(raw, properties?.[m[1].trim()]?.type);
  }
  if (inner.slice(last).trim() !== "") return null;
  return { name, arguments: JSON.stringify(args) };
}

function parameterValue(raw: string, declaredType: unknown): unknown {
  if (declaredType === "string") return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}
