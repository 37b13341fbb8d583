import { assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { connectionCap } from "./fd_limit.ts";
import { HttpError } from "./errors.ts";
import { framing, headEnd, parseHead, wantsClose } from "./head.ts";

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("head: CRLF or bare LF lines; names lower-cased, values trimmed", () => {
  const text = "POST /v1/x?y=1 HTTP/1.1\r\nHost: a\r\nX-Thing:  two words \r\n\r\nBODY";
  assertEquals(headEnd(enc(text)), text.indexOf("BODY"));
  assertEquals(
    headEnd(enc("GET / HTTP/1.0\nHost: a\n\nrest")),
    "GET / HTTP/1.0\nHost: a\n\n".length,
  );
  assertEquals(headEnd(enc("GET / HTTP/1.1\r\nHost: a\r\n")), -1);
  const head = parseHead(enc(text.slice(0, headEnd(enc(text)))));
  assertEquals(head, {
    method: "POST",
    target: "/v1/x?y=1",
    minor: 1,
    headers: [["host", "a"], ["x-thing", "two words"]],
  });
  assertEquals(wantsClose(head), false);
  assertEquals(wantsClose(parseHead(enc("GET / HTTP/1.0\r\n\r\n"))), true);
  assertEquals(wantsClose(parseHead(enc("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"))), true);
});

Deno.test("head: framing by Content-Length or chunked; ambiguity refused", () => {
  const f = (fields: string, version = "1.1") =>
    framing(parseHead(enc(`POST / HTTP/${version}\r\n${fields}\r\n`)));
  assertEquals(f(""), { kind: "none" });
  assertEquals(f("Content-Length: 0\r\n"), { kind: "none" });
  assertEquals(f("Content-Length: 12\r\n"), { kind: "length", length: 12 });
  assertEquals(f("Content-Length: 12\r\nContent-Length: 12\r\n"), { kind: "length", length: 12 });
  assertEquals(f("Transfer-Encoding: Chunked\r\n"), { kind: "chunked" });
  const refused: [string, string, number][] = [
    ["Content-Length: 1\r\nTransfer-Encoding: chunked\r\n", "1.1", 400],
    ["Content-Length: 1\r\nContent-Length: 2\r\n", "1.1", 400],
    ["Content-Length: -1\r\n", "1.1", 400],
    ["Content-Length: 0x10\r\n", "1.1", 400],
    ["Transfer-Encoding: gzip, chunked\r\n", "1.1", 501],
    ["Transfer-Encoding: chunked\r\n", "1.0", 400],
  ];
  for (const [fields, version, status] of refused) {
    const err = assertThrows(() => f(fields, version), HttpError);
    assertEquals(err.status, status, fields);
  }
});

Deno.test("head: malformed heads are refused with their status", () => {
  const cases: [string, number][] = [
    ["GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400],
    ["GET / HTTP/1.1\r\n folded\r\n\r\n", 400],
    ["GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400],
    ["GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400],
    ["GET  / HTTP/1.1\r\n\r\n", 400],
    ["GET / HTTP/3.0\r\n\r\n", 505],
    ["PRI * HTTP/2.0\r\n\r\n", 505],
  ];
  for (const [text, status] of cases) {
    const err = assertThrows(() => parseHead(enc(text)), HttpError);
    assertEquals(err.status, status, JSON.stringify(text));
  }
});

Deno.test("connection cap: below the open-file limit, with room for everything else", () => {
  assertEquals(connectionCap(256), 192);
  assertEquals(connectionCap(1024), 768);
  assertEquals(connectionCap(null), 768);
  assertEquals(connectionCap(1_048_576), 4096);
  assertEquals(connectionCap(40), 16);
});
