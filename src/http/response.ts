/**
 * Writing a `Response` onto an HTTP/1.x connection. A body already complete when it is
 * handed over (every JSON answer) goes out with Content-Length; a body still being
 * produced goes out chunked, its head at once (a client sees the status while a long
 * prompt is still being read) and each piece the moment it exists (SSE tokens must not
 * wait in a buffer).
 */

const encoder = new TextEncoder();

/** Hop-by-hop fields are this connection's business, not the handler's. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "content-length",
]);

const REASONS: Record<number, string> = {
  100: "Continue",
  200: "OK",
  201: "Created",
  204: "No Content",
  304: "Not Modified",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
  502: "Bad Gateway",
  503: "Service Unavailable",
  505: "HTTP Version Not Supported",
};

export interface ResponseTarget {
  /** Writes every byte, or throws when the connection is gone. */
  write(bytes: Uint8Array): Promise<void>;
  /** Set while the body is being read, so that closing the connection can cancel it. */
  reader: ReadableStreamDefaultReader<Uint8Array> | null;
}

export interface WriteOptions {
  /** The request was HEAD: headers only. */
  head: boolean;
  /** The connection closes after this response. */
  close: boolean;
  /** HTTP/1.0 has no chunked encoding: an unknown length is delimited by closing. */
  minor: 0 | 1;
}

function headBytes(status: number, statusText: string, fields: [string, string][]): Uint8Array {
  let text = `HTTP/1.1 ${status} ${statusText || REASONS[status] || ""}\r\n`;
  for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
  return encoder.encode(text + "\r\n");
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function chunk(piece: Uint8Array): Uint8Array {
  return concat([
    encoder.encode(piece.length.toString(16) + "\r\n"),
    piece,
    encoder.encode("\r\n"),
  ]);
}

const LAST_CHUNK = encoder.encode("0\r\n\r\n");
/** Bytes an answer may collect before its head goes out without a length. */
const MAX_BUFFERED = 256 * 1024;
const STILL_COMING = Symbol("still coming");

function nextMacrotask(): Promise<typeof STILL_COMING> {
  return new Promise((resolve) => setTimeout(() => resolve(STILL_COMING), 0));
}

/** Fields of the response as given, less hop-by-hop ones, plus Date. */
function endToEnd(res: Response): [string, string][] {
  const fields: [string, string][] = [];
  for (const [name, value] of res.headers) {
    if (name === "set-cookie" || HOP_BY_HOP.has(name)) continue;
    fields.push([name, value]);
  }
  for (const cookie of res.headers.getSetCookie()) fields.push(["set-cookie", cookie]);
  if (!res.headers.has("date")) fields.push(["date", new Date().toUTCString()]);
  return fields;
}

/**
 * Sends `res`. Resolves true when the response went out whole; false when its body failed
 * midway (the connection must then close without a proper end, so the client sees a cut).
 * Throws when the connection fails.
 */
export async function writeResponse(
  out: ResponseTarget,
  res: Response,
  opts: WriteOptions,
): Promise<boolean> {
  const fields = endToEnd(res);
  if (opts.close) fields.push(["connection", "close"]);
  const bodiless = opts.head || res.status === 204 || res.status === 304;
  if (bodiless || res.body === null) {
    await res.body?.cancel().catch(() => {});
    const declared = res.headers.get("content-length");
    if (opts.head && declared !== null) fields.push(["content-length", declared]);
    else if (!bodiless) fields.push(["content-length", "0"]);
    await out.write(headBytes(res.status, res.statusText, fields));
    return true;
  }

  const reader = res.body.getReader();
  out.reader = reader;
  // A body that fails is a cut, not a connection error: `null` says so.
  const read = () => reader.read().catch(() => null);
  try {
    // Take what the body already holds without waiting: an answer built in memory has
    // ended before the next macrotask, and goes out whole with its length.
    const pieces: Uint8Array[] = [];
    let size = 0;
    let pending: ReturnType<typeof read> | null = null;
    let ended = false;
    while (size <= MAX_BUFFERED) {
      pending ??= read();
      const next = await Promise.race([pending, nextMacrotask()]);
      if (next === STILL_COMING) break;
      pending = null;
      if (next === null) return false;
      if (next.done) {
        ended = true;
        break;
      }
      pieces.push(next.value);
      size += next.value.length;
    }
    if (ended) {
      fields.push(["content-length", String(size)]);
      await out.write(concat([headBytes(res.status, res.statusText, fields), ...pieces]));
      return true;
    }
    const chunked = opts.minor === 1;
    if (chunked) fields.push(["transfer-encoding", "chunked"]);
    const frame = (p: Uint8Array) => chunked ? chunk(p) : p;
    await out.write(concat([headBytes(res.status, res.statusText, fields), ...pieces.map(frame)]));
    for (;;) {
      const next = await (pending ?? read());
      pending = null;
      if (next === null) return false;
      if (next.done) break;
      if (next.value.length > 0) await out.write(frame(next.value));
    }
    if (chunked) await out.write(LAST_CHUNK);
    return true;
  } catch (err) {
    reader.cancel(err).catch(() => {});
    throw err;
  } finally {
    out.reader = null;
  }
}

/** A bodyless answer for a request refused before any handler saw it. */
export function refusal(status: number, message: string): Uint8Array {
  const body = encoder.encode(message + "\n");
  return concat([
    headBytes(status, "", [
      ["content-type", "text/plain; charset=utf-8"],
      ["content-length", String(body.length)],
      ["connection", "close"],
      ["date", new Date().toUTCString()],
    ]),
    body,
  ]);
}

/** The interim answer to `Expect: 100-continue`. */
export const CONTINUE: Uint8Array = encoder.encode("HTTP/1.1 100 Continue\r\n\r\n");
