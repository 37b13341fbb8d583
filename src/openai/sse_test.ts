import { assertEquals } from "../../tests/support/assert.ts";
import { SseChannel } from "./sse.ts";

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return new TextDecoder().decode(await new Response(stream).arrayBuffer());
}

Deno.test("sse: LF-only data frames, [DONE], keep-alive comments only while idle", async () => {
  const sse = new SseChannel(() => {}, 40);
  const body = readAll(sse.stream);
  sse.data({ a: "x\ny" });
  await new Promise((r) => setTimeout(r, 110));
  sse.event("response.created", { b: 1 });
  sse.done();
  const text = await body;
  // How many keep-alives fit in the idle time depends on the timers of a busy machine;
  // that they come only while idle, between frames and LF-only, does not.
  const match =
    /^data: \{"a":"x\\ny"\}\n\n((?::\n\n)+)event: response\.created\ndata: \{"b":1\}\n\ndata: \[DONE\]\n\n$/
      .exec(text);
  assertEquals(match !== null, true, JSON.stringify(text));
  assertEquals(sse.open, false);
});

Deno.test("sse: a client that cancels the body is reported once, and writes stop", async () => {
  let cancelled = 0;
  const sse = new SseChannel(() => cancelled++, 20);
  const reader = sse.stream.getReader();
  sse.data({ n: 1 });
  await reader.read();
  await reader.cancel();
  assertEquals([cancelled, sse.open], [1, false]);
  sse.data({ n: 2 });
  sse.done();
  await new Promise((r) => setTimeout(r, 50));
  assertEquals(cancelled, 1);
});
