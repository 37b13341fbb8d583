/**
 * How requests end when their client or their model goes away: a non-streaming request
 * whose client disconnects is cancelled like a streaming one, and requests still queued
 * when their model is unloaded hear `model_unloaded`.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { eventually, jsonOf, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, parseSse, streamEnd, v1 } from "./support.ts";
import { parsePrometheus } from "../support/prometheus.ts";

type Json = Record<string, unknown>;

/** End-of-generation ids pushed out of reach, so a request runs to max_tokens. */
const NO_EOG = { "151643": -100, "151645": -100 };

Deno.test("a non-streaming request whose client left is cancelled, not run to the end", async () => {
  await withNode(nativeNode({ contextLength: 4096 }), async (node) => {
    const model = await loadFixture(node, "qwen3-small-q4_k_m.gguf");
    // A plain socket, as curl or a gateway's HTTP client would leave: it closes.
    const body = JSON.stringify({
      model,
      messages: [{ role: "user", content: "Count to a thousand." }],
      max_tokens: 4000,
      logit_bias: NO_EOG,
    });
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: node.port });
    await conn.write(new TextEncoder().encode(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${new TextEncoder().encode(body).length}\r\n\r\n${body}`,
    ));
    // Once it generates, the client goes.
    await eventually(
      async () => {
        const health = await jsonOf(await node.get("/health")) as { models: Json[] };
        return (health.models[0]?.in_flight as number) > 0 ? true : undefined;
      },
      30_000,
      "the request running",
    );
    conn.close();
    const outcomes = await eventually(
      async () => {
        const metrics = parsePrometheus(await (await node.get("/metrics")).text());
        const ended = metrics.get("neuron_model_requests_total")?.samples ?? [];
        return ended.some((s) => s.value > 0) ? ended : undefined;
      },
      60_000,
      "the request ending",
    );
    const by = Object.fromEntries(outcomes.map((s) => [s.labels.outcome, s.value]));
    assertEquals(by.cancelled, 1, JSON.stringify(by));
    assert(!by.completed, JSON.stringify(by));
  });
});

Deno.test("requests queued when their model is unloaded hear model_unloaded", async () => {
  await withNode(nativeNode({ maxInFlight: 1, contextLength: 4096 }), async (node) => {
    const model = await loadFixture(node, "qwen3-small-q4_k_m.gguf");
    const long = {
      model,
      messages: [{ role: "user", content: "Count to a thousand." }],
      max_tokens: 4000,
      logit_bias: NO_EOG,
    };
    const running = v1(node, "chat/completions", long);
    await eventually(
      async () => {
        const health = await jsonOf(await node.get("/health")) as { models: Json[] };
        return (health.models[0]?.in_flight as number) > 0 ? true : undefined;
      },
      30_000,
      "the first request running",
    );
    const queued = v1(node, "chat/completions", { ...long, max_tokens: 4 });
    await eventually(
      async () => {
        const health = await jsonOf(await node.get("/health")) as { models: Json[] };
        return (health.models[0]?.queue_depth as number) > 0 ? true : undefined;
      },
      30_000,
      "the second request queued",
    );
    const unload = await node.post("/models/unload", { model_id: model });
    assertEquals(unload.status, 200);
    await unload.body?.cancel();
    const res = await queued;
    const body = await jsonOf(res) as { error: Json };
    assertEquals([res.status, body.error.code], [503, "model_unloaded"]);
    assert(res.headers.get("retry-after"), "a retryable 503 says when");
    await (await running).body?.cancel();
  });
});

Deno.test("a stream cut by shutdown ends with its finish chunk, the usage so far and [DONE]", async () => {
  let text = "";
  await withNode(
    { ...nativeNode({ contextLength: 4096 }), shutdown_grace_secs: 0 },
    async (node) => {
      const model = await loadFixture(node, "qwen3-small-q4_k_m.gguf");
      const res = await v1(node, "chat/completions", {
        model,
        messages: [{ role: "user", content: "Count to a thousand." }],
        max_tokens: 4000,
        logit_bias: NO_EOG,
        stream: true,
      });
      const reader = res.body!.getReader();
      text += new TextDecoder().decode((await reader.read()).value);
      const reading = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          text += new TextDecoder().decode(value);
        }
      })();
      await Promise.all([node.shutdown(), reading]);
    },
  );
  const end = streamEnd(parseSse(text).frames);
  assertEquals(end.finishReason, "cancelled");
  assert(end.fault !== undefined, "the stream says why it was cut");
  assert(end.usage.completion_tokens >= 0 && end.usage.prompt_tokens > 0, JSON.stringify(end));
});
