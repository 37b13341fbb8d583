/**
 * The node's HTTP/1.1 server on raw sockets: keep-alive and pipelining, framing both ways,
 * refusals of malformed requests, the timers Deno.serve lacked, a client leaving
 * mid-response (the connection cap, draining and closing are http_connections_test.ts).
 * Timeouts are short here; every wait on the server has a generous hang guard and no
 * assertion depends on how fast the machine is.
 */
import type { HttpError } from "../../src/http/mod.ts";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../support/assert.ts";
import { eventually, withNode } from "../support/node.ts";
import { count, GUARD_MS, Raw, withServer } from "../support/raw_http.ts";

const encoder = new TextEncoder();

Deno.test("http: keep-alive and pipelining; Content-Length for one piece, chunks as they come", async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const handler = (req: Request) => {
    const path = new URL(req.url).pathname;
    if (path !== "/stream") return new Response(`hello ${path}`);
    return new Response(
      new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(encoder.encode("first;"));
          await released;
          c.enqueue(encoder.encode("second;"));
          c.close();
        },
      }),
    );
  };
  await withServer({ handler }, async (server) => {
    const raw = await Raw.open(server);
    await raw.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
    const two = await raw.until((t) => t.includes("hello /b"), "both answers");
    assertEquals(count(two, "HTTP/1.1 200 OK"), 2);
    assert(two.indexOf("hello /a") < two.indexOf("hello /b"), "in order");
    assertStringIncludes(two.toLowerCase(), "content-length: 8\r\n");

    await raw.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    // The first piece arrives while the second does not exist yet.
    const head = await raw.until((t) => t.includes("first;"), "the first piece");
    assertStringIncludes(head.toLowerCase(), "transfer-encoding: chunked");
    release();
    await raw.until((t) => t.endsWith("0\r\n\r\n"), "the last chunk");
    assertStringIncludes(raw.text, "7\r\nsecond;\r\n");
    assertEquals(server.connections, 1);
    raw.close();
  });
});

Deno.test("http: Content-Length and chunked uploads arrive whole; 100-continue is answered", async () => {
  const handler = async (req: Request) => new Response(`got ${(await req.text()).length}`);
  await withServer({ handler }, async (server) => {
    const raw = await Raw.open(server);
    await raw.send("POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
    await raw.until((t) => t.includes("got 11"));
    await raw.send(
      "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
        "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n",
    );
    await raw.until((t) => count(t, "got 11") === 2, "the chunked upload's answer");
    await raw.send(
      "POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
    );
    await raw.until((t) => t.includes("HTTP/1.1 100 Continue\r\n\r\n"), "100 Continue");
    await raw.send("abc");
    await raw.until((t) => t.includes("got 3"));
    raw.close();
  });
});

Deno.test("http: malformed requests are refused before any handler, the server keeps serving", async () => {
  let handled = 0;
  const handler = async (req: Request) => {
    handled++;
    try {
      await req.text();
    } catch (err) {
      return new Response(null, { status: (err as HttpError).status ?? 500 });
    }
    return new Response("ok");
  };
  const cases: [string, string | Uint8Array, number][] = [
    ["space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400],
    ["folded line", "GET / HTTP/1.1\r\nHost: x\r\n y\r\n\r\n", 400],
    ["garbage", "HELLO\r\n\r\n", 400],
    [
      "both framings",
      "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
      400,
    ],
    ["conflicting lengths", "POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd", 400],
    ["gzip upload", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501],
    ["bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400],
    ["HTTP/2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505],
    ["huge head", `GET / HTTP/1.1\r\nX-Big: ${"a".repeat(40_000)}\r\n\r\n`, 431],
    [
      "too many fields",
      `GET / HTTP/1.1\r\n${Array.from({ length: 101 }, (_, i) => `X-${i}: 1\r\n`).join("")}\r\n`,
      431,
    ],
  ];
  await withServer(
    { handler },
    async (server) => {
      for (const [what, request, status] of cases) {
        const raw = await Raw.open(server);
        await raw.send(request);
        const text = await raw.end();
        assertMatch(text, new RegExp(`^HTTP/1.1 ${status} `), `${what}: ${JSON.stringify(text)}`);
      }
      assertEquals(handled, 1, "only the chunked upload reached the handler (its body is bad)");
      const ok = await Raw.open(server);
      await ok.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      await ok.until((t) => t.endsWith("ok"));
      ok.close();
    },
  );
});

Deno.test("http: a connection silent or half-sent past header_timeout is closed", async () => {
  await withServer({ headerTimeoutMs: 200 }, async (server) => {
    const silent = await Raw.open(server);
    const half = await Raw.open(server);
    await half.send("GET / HTTP/1.1\r\nHost: x\r\n");
    assertEquals(await silent.end(), "");
    assertMatch(await half.end(), /^HTTP\/1.1 408 /);
    await eventually(() => server.connections === 0 || undefined, GUARD_MS, "no connections");
  });
});

Deno.test("http: idle_timeout ends a kept-alive connection between requests, not a long answer", async () => {
  const idleTimeoutMs = 300;
  const handler = async (req: Request) => {
    if (new URL(req.url).pathname === "/slow") {
      await new Promise((r) => setTimeout(r, 3 * idleTimeoutMs));
    }
    return new Response("done");
  };
  await withServer({ idleTimeoutMs, handler }, async (server) => {
    const raw = await Raw.open(server);
    await raw.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    await raw.until((t) => t.endsWith("done"), "the slow answer");
    const text = await raw.end();
    assertEquals(count(text, "HTTP/1.1 200"), 1);
  });
});

Deno.test("http: a client that leaves aborts the request's signal and cancels its body", async () => {
  let aborted = false;
  let cancelled = false;
  const handler = (req: Request) => {
    req.signal.addEventListener("abort", () => (aborted = true));
    return new Response(
      new ReadableStream<Uint8Array>({
        start: (c) => c.enqueue(encoder.encode("data: 1\n\n")),
        cancel: () => {
          cancelled = true;
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  };
  await withServer({ handler }, async (server) => {
    const raw = await Raw.open(server);
    await raw.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
    await raw.until((t) => t.includes("data: 1"));
    raw.close();
    await eventually(() => (aborted && cancelled) || undefined, GUARD_MS, "abort and cancel");
    await eventually(() => server.connections === 0 || undefined, GUARD_MS, "closed");
  });
});

Deno.test("http: an upload refused unread still gets its answer (no reset)", async () => {
  const handler = () => new Response("too large", { status: 413 });
  await withServer({ handler }, async (server) => {
    const size = 8 * 1024 * 1024;
    const raw = await Raw.open(server);
    await raw.send(`POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: ${size}\r\n\r\n`);
    // The client sends its whole body before it reads: the answer must still be there.
    const body = new Uint8Array(1024 * 1024);
    const sent = await (async () => {
      for (let sent = 0; sent < size; sent += body.length) await raw.send(body);
      return "all";
    })().catch((err) => `stopped: ${err}`);
    assertEquals(sent, "all");
    const text = await raw.until((t) => t.endsWith("too large"), "the 413");
    assertMatch(text, /^HTTP\/1.1 413 /);
    assertStringIncludes(text.toLowerCase(), "connection: close");
    raw.close();
  });
});

Deno.test("node: [http] header_timeout_secs and idle_timeout_secs close stalled connections", async () => {
  await withNode({ http: { header_timeout_secs: 0.2, idle_timeout_secs: 0.3 } }, async (node) => {
    const half = await Raw.open(node);
    await half.send("GET /health HTTP/1.1\r\nHost: x\r\n");
    assertMatch(await half.end(), /^HTTP\/1.1 408 /);

    const kept = await Raw.open(node);
    await kept.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    await kept.until((t) => t.includes("uptime_secs"), "/health");
    const text = await kept.end();
    assertEquals(count(text, "HTTP/1.1 200"), 1);
  });
});
