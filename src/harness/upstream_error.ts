/**
 * An upstream's error answer, re-dressed in neuron's OpenAI envelope so that clients see one
 * error shape whatever runs behind the node. Upstreams disagree on theirs: llama-server
 * answers `{"error": {"code": 400, "message", "type"}}`, older vLLM a flat
 * `{"object": "error", "message", "type", "param", "code": 400}`, FastAPI `{"detail": …}`,
 * a proxy in between plain text. The upstream's status is kept, and so is what it said,
 * under `error.upstream`.
 */
import { clientResponseHeaders } from "./proxy.ts";

/** Codes the envelope carries: stable, whatever the upstream called the failure. */
export type UpstreamErrorCode = "context_length_exceeded" | "upstream_error";

/** The most of an error body that is read; the rest is cut, not buffered. */
const MAX_ERROR_BYTES = 64 * 1024;

async function readCapped(body: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    while (total < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      total += value.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const out = new Uint8Array(Math.min(total, limit));
  let at = 0;
  for (const c of chunks) {
    const part = c.subarray(0, out.length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** The error body as text, undoing a gzip or deflate encoding the upstream applied. */
async function bodyText(res: Response): Promise<string> {
  if (!res.body) return "";
  const encoding = (res.headers.get("content-encoding") ?? "identity").trim().toLowerCase();
  let stream: ReadableStream<Uint8Array> = res.body;
  if (encoding === "gzip" || encoding === "x-gzip" || encoding === "deflate") {
    stream = res.body.pipeThrough<Uint8Array>(
      new DecompressionStream(encoding === "deflate" ? "deflate" : "gzip"),
    );
  } else if (encoding !== "identity") {
    await res.body.cancel();
    return `(a body in content-encoding ${encoding})`;
  }
  try {
    return new TextDecoder().decode(await readCapped(stream, MAX_ERROR_BYTES));
  } catch {
    return `(a body that is not valid ${encoding})`;
  }
}

function field(obj: unknown, key: string): unknown {
  return typeof obj === "object" && obj !== null
    ? (obj as Record<string, unknown>)[key]
    : undefined;
}

function text(v: unknown): string | undefined {
  return typeof v === "string" && v.trim() !== "" ? v : undefined;
}

/** The part of the body that describes the error: `error` when it is an object, else all. */
function errorObject(body: unknown): unknown {
  const inner = field(body, "error");
  return typeof inner === "object" && inner !== null ? inner : body;
}

function messageOf(body: unknown, raw: string): string | undefined {
  const err = errorObject(body);
  return text(field(err, "message")) ?? text(field(body, "error")) ??
    text(field(body, "detail")) ?? text(field(body, "message")) ??
    (body === undefined ? text(raw.trim().slice(0, 300)) : undefined);
}

const CONTEXT_MESSAGE =
  /maximum context length|exceeds? the (available )?context size|context length exceeded|larger than the max context size/i;

function codeOf(status: number, body: unknown, message: string): UpstreamErrorCode {
  const err = errorObject(body);
  const contextual = field(err, "code") === "context_length_exceeded" ||
    field(err, "type") === "exceed_context_size_error" || CONTEXT_MESSAGE.test(message);
  return status === 400 && contextual ? "context_length_exceeded" : "upstream_error";
}

/** As src/server/errors.ts types neuron's own errors, so one status reads one way. */
function typeOf(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/**
 * The client's answer to an upstream that answered `res` (status 400 or above): the same
 * status and headers (Retry-After included), with our envelope as the body.
 */
export async function wrapUpstreamError(res: Response, harness: string): Promise<Response> {
  const raw = await bodyText(res);
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    body = undefined;
  }
  const message = messageOf(body, raw) ??
    `harness ${harness}: the upstream answered ${res.status} ${res.statusText}`.trim();
  const param = text(field(errorObject(body), "param")) ?? null;
  const envelope = {
    error: {
      message,
      type: typeOf(res.status),
      code: codeOf(res.status, body, message),
      param,
      upstream: { status: res.status, body: body ?? raw },
    },
  };
  const headers = clientResponseHeaders(res.headers);
  headers.delete("content-encoding");
  headers.set("content-type", "application/json");
  return new Response(JSON.stringify(envelope), {
    status: res.status,
    statusText: res.statusText,
    headers,
  });
}
