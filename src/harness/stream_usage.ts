/**
 * The gateway meters a streamed answer from its usage chunk, and OpenAI-compatible servers
 * (vLLM, llama-server, OpenAI itself) send that chunk only when the request sets
 * `stream_options.include_usage`. A relayed streaming request that does not ask for it is
 * rewritten to ask. Only the `stream_options` member changes: every other byte of the body
 * stays as the client sent it, so numbers beyond 2^53, key order and escapes survive.
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Where a top-level member's value lies in a JSON object's text, as [start, end). */
interface Span {
  start: number;
  end: number;
}

interface ObjectLayout {
  /** The last occurrence of the member, as JSON.parse keeps the last one. */
  member: Span | null;
  /** Index of the object's closing brace. */
  close: number;
  empty: boolean;
}

function skipWhitespace(text: string, i: number): number {
  while (i < text.length && " \t\n\r".includes(text[i])) i++;
  return i;
}

/** Index just past the string literal that starts at `i` (an opening quote). */
function skipString(text: string, i: number): number {
  for (i++; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i + 1;
  }
  return -1;
}

/** Index just past the JSON value that starts at `i`. */
function skipValue(text: string, i: number): number {
  if (text[i] === '"') return skipString(text, i);
  if (text[i] === "{" || text[i] === "[") {
    let depth = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        i = skipString(text, i);
        if (i < 0) return -1;
        continue;
      }
      if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") depth--;
      i++;
      if (depth === 0) return i;
    }
    return -1;
  }
  while (i < text.length && !",}] \t\n\r".includes(text[i])) i++;
  return i;
}

/** The layout of the top-level object in `text`, or null when it is not one. */
function layout(text: string, key: string): ObjectLayout | null {
  let i = skipWhitespace(text, 0);
  if (text[i] !== "{") return null;
  i = skipWhitespace(text, i + 1);
  let member: Span | null = null;
  let empty = true;
  while (text[i] !== "}") {
    if (text[i] !== '"') return null;
    const keyEnd = skipString(text, i);
    if (keyEnd < 0) return null;
    const name: unknown = JSON.parse(text.slice(i, keyEnd));
    i = skipWhitespace(text, keyEnd);
    if (text[i] !== ":") return null;
    const start = skipWhitespace(text, i + 1);
    const end = skipValue(text, start);
    if (end < 0) return null;
    if (name === key) member = { start, end };
    empty = false;
    i = skipWhitespace(text, end);
    if (text[i] === ",") i = skipWhitespace(text, i + 1);
    else if (text[i] !== "}") return null;
  }
  return { member, close: i, empty };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * `body` as it should go upstream: unchanged unless it asks for a stream without usage, in
 * which case `stream_options` is set to the client's options plus `include_usage: true`.
 * `json` is the same body, parsed.
 */
export function withStreamUsage(
  body: Uint8Array<ArrayBuffer>,
  json: Record<string, unknown>,
): Uint8Array<ArrayBuffer> {
  if (json.stream !== true) return body;
  const options = json.stream_options;
  if (isObject(options) && options.include_usage === true) return body;
  const value = JSON.stringify({ ...(isObject(options) ? options : {}), include_usage: true });
  const text = decoder.decode(body);
  const found = layout(text, "stream_options");
  if (!found) return encoder.encode(JSON.stringify({ ...json, stream_options: JSON.parse(value) }));
  const { member, close, empty } = found;
  const rewritten = member
    ? text.slice(0, member.start) + value + text.slice(member.end)
    : text.slice(0, close) + `${empty ? "" : ","}"stream_options":${value}` + text.slice(close);
  return encoder.encode(rewritten);
}
