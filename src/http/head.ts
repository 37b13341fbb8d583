/**
 * HTTP/1.x request heads (RFC 9112): the request line and header fields, and how the body
 * that follows is framed. Strict where leniency lets two parsers disagree about where a
 * request ends (whitespace before a colon, folded lines, Content-Length beside
 * Transfer-Encoding, differing Content-Lengths): those are refused, not guessed at.
 */

import { HttpError } from "./errors.ts";

export interface RequestHead {
  method: string;
  /** The request target as sent: `/path?query` or `http://host/path`. */
  target: string;
  /** 1 for HTTP/1.1 (and later 1.x), 0 for HTTP/1.0. */
  minor: 0 | 1;
  headers: [string, string][];
}

export type Framing =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" };

/** Largest head accepted (request line and every header field together). */
export const MAX_HEAD_BYTES = 32 * 1024;
export const MAX_HEADER_FIELDS = 100;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/(\d)\.(\d)$/;
const LF = 10;
const CR = 13;

/**
 * Index just past the empty line that ends a head in `buf`, or -1. Lines end in CRLF or a
 * bare LF. `from` skips bytes already searched (a head arrives in pieces).
 */
export function headEnd(buf: Uint8Array, from = 0): number {
  for (let i = buf.indexOf(LF, Math.max(0, from)); i >= 0; i = buf.indexOf(LF, i + 1)) {
    if (buf[i + 1] === LF) return i + 2;
    if (buf[i + 1] === CR && buf[i + 2] === LF) return i + 3;
  }
  return -1;
}

/** Header bytes are opaque octets; each becomes the code point of the same value. */
function latin1(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return out;
}

function malformed(message: string): HttpError {
  return new HttpError("malformed_request", message);
}

/** Parses a whole head (as delimited by `headEnd`). */
export function parseHead(bytes: Uint8Array): RequestHead {
  const lines = latin1(bytes).split("\n").map((l) => l.endsWith("\r") ? l.slice(0, -1) : l);
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  const requestLine = lines[0] ?? "";
  const m = REQUEST_LINE.exec(requestLine);
  if (!m) {
    if (/ HTTP\/2(\.0)?$/.test(requestLine)) {
      throw new HttpError("version_not_supported", "HTTP/2 is not supported; use HTTP/1.1");
    }
    throw malformed("malformed request line");
  }
  const [, method, target, major, minor] = m;
  if (major !== "1") {
    throw new HttpError("version_not_supported", `HTTP/${major}.${minor} is not supported`);
  }
  if (lines.length - 1 > MAX_HEADER_FIELDS) {
    throw new HttpError("header_too_large", `more than ${MAX_HEADER_FIELDS} header fields`);
  }
  const headers: [string, string][] = [];
  for (const line of lines.slice(1)) {
    if (line.startsWith(" ") || line.startsWith("\t")) {
      throw malformed("obsolete line folding in a header field");
    }
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    if (!TOKEN.test(name)) throw malformed("malformed header field name");
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (/[\0\r]/.test(value)) throw malformed(`malformed value of header ${name}`);
    headers.push([name.toLowerCase(), value]);
  }
  return { method, target, minor: minor === "0" ? 0 : 1, headers };
}

/** Every value of a header, comma-separated lists split, trimmed, empty items dropped. */
export function headerList(head: RequestHead, name: string): string[] {
  return head.headers.filter(([n]) => n === name)
    .flatMap(([, v]) => v.split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "");
}

/** How the request body is delimited. */
export function framing(head: RequestHead): Framing {
  const te = headerList(head, "transfer-encoding").map((v) => v.toLowerCase());
  const cl = headerList(head, "content-length");
  if (head.headers.some(([n]) => n === "transfer-encoding")) {
    if (cl.length > 0) throw malformed("both Content-Length and Transfer-Encoding");
    if (head.minor === 0) throw malformed("Transfer-Encoding in an HTTP/1.0 request");
    if (te.length !== 1 || te[0] !== "chunked") {
      throw new HttpError(
        "unsupported_transfer_encoding",
        `Transfer-Encoding ${JSON.stringify(te.join(", "))}: only chunked is supported`,
      );
    }
    return { kind: "chunked" };
  }
  if (head.headers.some(([n]) => n === "content-length")) {
    if (cl.length === 0 || cl.some((v) => !/^\d{1,15}$/.test(v) || v !== cl[0])) {
      throw malformed("malformed or conflicting Content-Length");
    }
    const length = Number(cl[0]);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "none" };
}

/** Whether the client asked for the connection to end after this exchange. */
export function wantsClose(head: RequestHead): boolean {
  const tokens = headerList(head, "connection").map((v) => v.toLowerCase());
  return tokens.includes("close") || (head.minor === 0 && !tokens.includes("keep-alive"));
}

/** `Expect: 100-continue`: the client waits for a go-ahead before sending the body. */
export function expectsContinue(head: RequestHead): boolean {
  return head.minor === 1 &&
    headerList(head, "expect").some((v) => v.toLowerCase() === "100-continue");
}
