import { assertEquals, assertRejects } from "../../tests/support/assert.ts";
import { BodyDecoder } from "./body.ts";
import { HttpError } from "./errors.ts";
import type { Framing } from "./head.ts";
import { type ByteReader, Inbound } from "./inbound.ts";

/** Hands out `text` `step` bytes per read, then EOF. */
function trickle(text: string, step: number): ByteReader {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return {
    read(p: Uint8Array): Promise<number | null> {
      if (at >= bytes.length) return Promise.resolve(null);
      const n = Math.min(step, p.length, bytes.length - at);
      p.set(bytes.subarray(at, at + n));
      at += n;
      return Promise.resolve(n);
    },
  };
}

async function decode(text: string, framing: Framing, step: number) {
  const inbound = new Inbound(trickle(text, step));
  let done = 0;
  const decoder = new BodyDecoder(inbound, framing, {
    beforeFirstRead: () => Promise.resolve(),
    waiting: () => {},
    done: () => done++,
  });
  let body = "";
  for (let piece = await decoder.next(); piece; piece = await decoder.next()) {
    body += new TextDecoder().decode(piece);
  }
  return { body, done, rest: new TextDecoder().decode(inbound.buffered) };
}

const CHUNKED =
  "4;name=v\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";

Deno.test("body: chunked and sized bodies decode whole however the bytes arrive", async () => {
  for (const step of [1, 2, 7, 1000]) {
    const chunked = await decode(CHUNKED, { kind: "chunked" }, step);
    assertEquals([chunked.body, chunked.done], ["Wikipedia in \r\n\r\nchunks.", 1], `step ${step}`);
    // What follows the body stays for the next request.
    assertEquals("NEXT".startsWith(chunked.rest), true, chunked.rest);
    const sized = await decode("hello worldNEXT", { kind: "length", length: 11 }, step);
    assertEquals([sized.body, sized.done], ["hello world", 1]);
  }
});

Deno.test("body: a body cut short or framed wrong is a typed error", async () => {
  const cases: [string, Framing, string][] = [
    ["hel", { kind: "length", length: 5 }, "client_closed"],
    ["5\r\nhel", { kind: "chunked" }, "client_closed"],
    ["3\r\nabcdef\r\n0\r\n\r\n", { kind: "chunked" }, "malformed_request"],
    ["-1\r\n", { kind: "chunked" }, "malformed_request"],
    [`${"f".repeat(5000)}\r\n`, { kind: "chunked" }, "malformed_request"],
  ];
  for (const [text, framing, code] of cases) {
    const err = await assertRejects(() => decode(text, framing, 3), HttpError);
    assertEquals(err.code, code, JSON.stringify(text.slice(0, 20)));
  }
});
