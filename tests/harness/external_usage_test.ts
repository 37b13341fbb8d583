/**
 * Streams relayed from an upstream always carry usage, because the gateway meters from the
 * usage chunk: a streaming request that does not ask for it is rewritten to ask, touching
 * nothing but `stream_options`, and the usage chunk is relayed to the client like every other
 * byte of the stream.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { streamFrames } from "../support/fake_upstream.ts";
import { bodySeen, MODEL, sha256, withUpstream } from "./upstream_node.ts";

function post(url: string, id: string, body: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body,
  });
}

/** The usage the gateway's metering would find: the last usage object in the stream. */
function lastUsage(sse: string): Record<string, number> | undefined {
  const usages = sse.split("\n\n")
    .filter((f) => f.startsWith("data: {"))
    .map((f) => JSON.parse(f.slice("data: ".length)).usage)
    .filter((u) => u);
  return usages.at(-1);
}

for (const api of ["mistralrs", "llama_router", "none"] as const) {
  Deno.test(`external (${api}): a stream that did not ask for usage still ends with it`, async () => {
    await withUpstream(
      { models: [MODEL], api },
      async (up, node) => {
        const sent =
          `{"model": "${MODEL}",  "stream": true, "max_tokens": 4, "seed": 12345678901234567890, "messages":[{"role":"user","content":"héllo \\u00e9"}]}`;
        const res = await post(node.url, "chatcmpl-usage", sent);
        assertEquals(res.status, 200);
        const text = await res.text();
        assertEquals(text, streamFrames("chatcmpl-usage", MODEL, 4, true).join(""));
        assertEquals(lastUsage(text), { prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 });
        // Only stream_options was added: the seed past 2^53 and the escape are as sent.
        assertEquals(
          await bodySeen(up, "chatcmpl-usage"),
          sent.slice(0, -1) + `,"stream_options":{"include_usage":true}}`,
        );
      },
      {},
      api,
    );
  });
}

Deno.test("external: the client's stream_options are kept, include_usage turned on", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    const sent = `{"model":"${MODEL}","stream":true,"max_tokens":3,` +
      `"stream_options": {"include_usage": false, "continuous_usage_stats": true},"messages":[]}`;
    const res = await post(node.url, "chatcmpl-opts", sent);
    assertEquals(lastUsage(await res.text())?.completion_tokens, 3);
    assertEquals(
      await bodySeen(up, "chatcmpl-opts"),
      `{"model":"${MODEL}","stream":true,"max_tokens":3,` +
        `"stream_options": {"include_usage":true,"continuous_usage_stats":true},"messages":[]}`,
    );

    const nulled = `{"model":"${MODEL}","stream":true,"stream_options":null,"messages":[]}`;
    const again = await post(node.url, "chatcmpl-null", nulled);
    assert(lastUsage(await again.text()), "usage after stream_options: null");
    assertEquals(
      await bodySeen(up, "chatcmpl-null"),
      `{"model":"${MODEL}","stream":true,"stream_options":{"include_usage":true},"messages":[]}`,
    );
  });
});

Deno.test("external: a request that asked for usage, or does not stream, is relayed untouched", async () => {
  await withUpstream({ models: [MODEL] }, async (up, node) => {
    for (
      const [id, sent] of [
        [
          "chatcmpl-asked",
          `{"model": "${MODEL}", "stream": true, "stream_options": {"include_usage": true}, "messages":[]}`,
        ],
        ["chatcmpl-plain", `{"model": "${MODEL}", "stream": false, "messages":[]}`],
      ]
    ) {
      const res = await post(node.url, id, sent);
      assertEquals(res.status, 200);
      assertEquals(res.headers.get("x-fake-request-sha256"), await sha256(sent));
      await res.body?.cancel();
      assertEquals(await bodySeen(up, id), sent);
    }
  });
});
