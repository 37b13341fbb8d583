import { assertEquals } from "../../tests/support/assert.ts";
import { clientResponseHeaders, passThrough, upstreamRequestHeaders } from "./proxy.ts";

Deno.test("proxy headers: hop-by-hop, connection-listed and decoded-body headers stay behind", () => {
  const up = upstreamRequestHeaders(
    new Headers({
      host: "node:13131",
      connection: "keep-alive, x-private",
      "x-private": "1",
      "content-length": "12",
      "content-encoding": "gzip",
      "accept-encoding": "gzip",
      "content-type": "application/json",
      "x-request-id": "r1",
    }),
  );
  assertEquals([...up], [
    ["accept-encoding", "identity"],
    ["content-type", "application/json"],
    ["x-request-id", "r1"],
  ]);
  const back = clientResponseHeaders(
    new Headers({
      "content-type": "text/event-stream",
      "content-length": "10",
      "transfer-encoding": "chunked",
      "content-encoding": "gzip",
      "x-upstream": "y",
    }),
  );
  // The body comes back as the upstream encoded it, so its encoding must come with it.
  assertEquals([...back], [
    ["content-encoding", "gzip"],
    ["content-type", "text/event-stream"],
    ["x-upstream", "y"],
  ]);
});

Deno.test("passThrough: relays every chunk and reports the end once, on finish or cancel", async () => {
  const chunks = [new Uint8Array([1]), new Uint8Array([2, 3])];
  let ends = 0;
  const src = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(ch);
      c.close();
    },
  });
  const out: Uint8Array[] = [];
  for await (const ch of passThrough(src, () => ends++)!) out.push(ch);
  assertEquals(out, chunks);
  assertEquals(ends, 1);

  let cancelled = "";
  const endless = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(new Uint8Array([0]));
    },
    cancel(reason) {
      cancelled = String(reason);
    },
  });
  const relayed = passThrough(endless, () => ends++)!;
  const reader = relayed.getReader();
  await reader.read();
  await reader.cancel("client gone");
  assertEquals(cancelled, "client gone");
  assertEquals(ends, 2);
  assertEquals(passThrough(null, () => ends++), null);
  assertEquals(ends, 3);
});
