/**
 * How the node's HTTP/1.1 server holds its connections: at the cap a new one takes the
 * place of the longest idle or waits for one to free, never a busy one's; draining closes
 * idle ones at once and lets busy ones finish; closing all frees even a handler that never
 * returns. Apart from http_test.ts, which is about one connection's requests. Every wait on
 * the server has a generous hang guard.
 */
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { eventually } from "../support/node.ts";
import { GUARD_MS, Raw, withServer } from "../support/raw_http.ts";

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
