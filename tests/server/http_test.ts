/**
 * The node's HTTP/1.1 server on raw sockets: keep-alive and pipelining, framing both ways,
 * refusals of malformed requests, the timers Deno.serve lacked, the connection cap, a
 * client leaving mid-response, draining. Timeouts are short here; every wait on the
 * server has a generous hang guard and no assertion depends on how fast the machine is.
 */
import { captureLogs } from "../../src/common/log.ts";
import { type HttpError, HttpServer, type HttpServerOptions } from "../../src/http/mod.ts";
import { assert, assertEquals, assertMatch, assertStringIncludes } from "../support/assert.ts";
import { eventually, withNode } from "../support/node.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const GUARD_MS = 20_000;

async function withServer(
  opts: Partial<HttpServerOptions>,
  fn: (server: HttpServer) => Promise<void>,
): Promise<void> {
  const restore = captureLogs(() => {});
  const server = new HttpServer({
    hostname: "127.0.0.1",
    port: 0,
    headerTimeoutMs: 10_000,
    idleTimeoutMs: 60_000,
    maxConnections: 64,
    handler: () => new Response("ok"),
    onError: () => new Response("handler failed", { status: 500 }),
    ...opts,
  });
  try {
    await fn(server);
  } finally {
    server.closeAll();
    await server.drain();
    restore();
  }
}

/** A raw client socket that keeps what it has read. */
class Raw {
  text = "";
  ended = false;
  #reading: Promise<void> | null = null;

  private constructor(readonly conn: Deno.TcpConn) {}

  static async open(server: { addr: { port: number } } | { port: number }): Promise<Raw> {
    const port = "addr" in server ? server.addr.port : server.port;
    return new Raw(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  async send(text: string | Uint8Array): Promise<void> {
    const bytes = typeof text === "string" ? encoder.encode(text) : text;
    for (let at = 0; at < bytes.length;) at += await this.conn.write(bytes.subarray(at));
  }

  #readOnce(): Promise<void> {
    this.#reading ??= (async () => {
      const buf = new Uint8Array(64 * 1024);
      let n: number | null = null;
      try {
        n = await this.conn.read(buf);
      } catch {
        n = null;
      }
      if (n === null) this.ended = true;
      else this.text += decoder.decode(buf.subarray(0, n));
    })().finally(() => (this.#reading = null));
    return this.#reading;
  }

  /** Reads until `pred` holds for what arrived (or the server closed). */
  async until(pred: (text: string) => boolean, what = "data"): Promise<string> {
    const deadline = Date.now() + GUARD_MS;
    while (!pred(this.text)) {
      if (this.ended) throw new Error(`closed before ${what}; got ${JSON.stringify(this.text)}`);
      if (Date.now() > deadline) throw new Error(`no ${what} within ${GUARD_MS} ms`);
      await Promise.race([this.#readOnce(), new Promise((r) => setTimeout(r, 200))]);
    }
    return this.text;
  }

  /** Reads until the server closes. */
  async end(): Promise<string> {
    const deadline = Date.now() + GUARD_MS;
    while (!this.ended) {
      if (Date.now() > deadline) throw new Error(`still open after ${GUARD_MS} ms`);
      await Promise.race([this.#readOnce(), new Promise((r) => setTimeout(r, 200))]);
    }
    return this.text;
  }

  close(): void {
    try {
      this.conn.close();
    } catch {
      // closed
    }
  }
}

const count = (text: string, part: string) => text.split(part).length - 1;

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

Deno.test("http: at the cap a new connection closes the longest idle; busy ones are never closed", async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let busy = 0;
  const handler = async (req: Request) => {
    if (new URL(req.url).pathname === "/busy") {
      busy++;
      await released;
    }
    return new Response("served");
  };
  await withServer({ maxConnections: 3, handler }, async (server) => {
    const a = await Raw.open(server);
    await eventually(() => server.connections === 1 || undefined, GUARD_MS, "a accepted");
    const b = await Raw.open(server);
    const c = await Raw.open(server);
    await b.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
    await c.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
    await eventually(() => busy === 2 || undefined, GUARD_MS, "two busy");
    const d = await Raw.open(server);
    await d.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await d.until((t) => t.endsWith("served"), "d served");
    assertEquals(await a.end(), "", "the idle one made room");
    assert(server.connections <= 3, `${server.connections} connections`);

    // Now b, c and d hold the three places; d is idle, so e takes d's.
    const e = await Raw.open(server);
    await e.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await e.until((t) => t.endsWith("served"), "e served");
    await d.end();
    release();
    await b.until((t) => t.endsWith("served"), "b finished");
    await c.until((t) => t.endsWith("served"), "c finished");
    for (const r of [b, c, e]) r.close();
  });
});

Deno.test("http: drain closes idle connections now, lets a busy one finish with Connection: close", async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let started = false;
  const handler = async () => {
    started = true;
    await released;
    return new Response("finished");
  };
  await withServer({ handler }, async (server) => {
    const idle = await Raw.open(server);
    const busy = await Raw.open(server);
    await busy.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await eventually(() => started || undefined, GUARD_MS, "busy");
    const drained = server.drain();
    assertEquals(await idle.end(), "");
    release();
    const text = await busy.end();
    assertStringIncludes(text.toLowerCase(), "connection: close");
    assert(text.endsWith("finished"), text);
    await drained;
    const refused = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port })
      .then((conn) => (conn.close(), "connected"), () => "refused");
    assertEquals(refused, "refused");
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

Deno.test("http: with every place busy a new connection waits, and gets the first one freed", async () => {
  const releases: (() => void)[] = [];
  const handler = async (req: Request) => {
    if (new URL(req.url).pathname === "/busy") {
      await new Promise<void>((r) => releases.push(r));
    }
    return new Response("served");
  };
  await withServer({ maxConnections: 2, handler }, async (server) => {
    const a = await Raw.open(server);
    const b = await Raw.open(server);
    await a.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
    await b.send("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
    await eventually(() => releases.length === 2 || undefined, GUARD_MS, "both busy");
    const c = await Raw.open(server);
    await c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assertEquals(server.connections, 2, "c waits in the backlog");
    // a's answer leaves it idle (kept alive, not closed): that is room enough for c.
    releases[0]();
    await a.until((t) => t.endsWith("served"), "a finished");
    await c.until((t) => t.endsWith("served"), "c served");
    assertEquals(await a.end(), a.text, "a, idle, made room");
    releases[1]();
    await b.until((t) => t.endsWith("served"), "b finished");
    for (const r of [b, c]) r.close();
  });
});

Deno.test("http: closing every connection frees it even if its handler never returns", async () => {
  let aborted = false;
  let started = false;
  const handler = (req: Request) => {
    started = true;
    req.signal.addEventListener("abort", () => (aborted = true));
    return new Promise<Response>(() => {});
  };
  await withServer({ handler }, async (server) => {
    const raw = await Raw.open(server);
    await raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    await eventually(() => started || undefined, GUARD_MS, "the handler running");
    server.closeAll();
    await server.drain();
    assertEquals([server.connections, aborted], [0, true]);
    assertEquals(await raw.end(), "");
  });
});
