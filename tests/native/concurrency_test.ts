/**
 * Bounded loopback load on the tiny model: 32 clients stream at once and every answer is
 * complete and equal to the golden continuation, while /health keeps answering; then the
 * admission limits: a full queue and a wait that runs out are 503 with Retry-After, and
 * the model serves again afterwards.
 */
import { modelGolden } from "../fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, parseSse, v1 } from "./support.ts";

type Json = Record<string, unknown>;

const CLIENTS = 32;
const hello = modelGolden("qwen3-tiny-q8_0").prompts.find((p) => p.name === "chat_hello")!;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function streamOnce(
  node: TestNode,
  model: string,
): Promise<{ text: string; usage: Json; ttftMs: number }> {
  const t0 = performance.now();
  const res = await v1(node, "chat/completions", {
    model,
    messages: hello.messages,
    temperature: 0,
    max_tokens: 32,
    stream: true,
  }, { "x-include-thinking": "1" });
  assertEquals(res.status, 200);
  let ttftMs = 0;
  let body = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    body += decoder.decode(chunk, { stream: true });
    if (!ttftMs && body.includes('"content"')) ttftMs = performance.now() - t0;
  }
  const { frames } = parseSse(body);
  assertEquals(frames.at(-1)!.data, "[DONE]");
  const chunks = frames.slice(0, -1).map((f) => f.data as Json);
  const text = chunks.map((c) =>
    ((c.choices as Json[])[0]?.delta as Json | undefined)?.content ?? ""
  ).join("");
  return { text, usage: chunks.at(-1)!.usage as Json, ttftMs };
}

Deno.test(`concurrency: ${CLIENTS} streaming clients, all correct; /health keeps answering`, async () => {
  await withNode(nativeNode({ maxInFlight: 8, maxQueueDepth: 64 }), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    let running = true;
    const healthMs: number[] = [];
    const statuses: number[] = [];
    const poller = (async () => {
      while (running) {
        const t = performance.now();
        const res = await node.get("/health");
        await res.arrayBuffer();
        statuses.push(res.status);
        healthMs.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: CLIENTS }, () => streamOnce(node, model)),
    );
    const wall = (performance.now() - t0) / 1000;
    // Answered while every stream ran: the engine works in its Worker, never on the thread
    // that answers /health (how fast each answer is depends on the machine, and is printed).
    const answeredDuringLoad = statuses.length;
    running = false;
    await poller;

    for (const r of results) {
      assertEquals(r.text, hello.greedy_text);
      assertEquals(r.usage, {
        prompt_tokens: hello.tokens.length,
        completion_tokens: 32,
        total_tokens: hello.tokens.length + 32,
      });
    }
    const sorted = healthMs.sort((a, b) => a - b);
    const ttft = results.map((r) => r.ttftMs).sort((a, b) => a - b);
    const p99 = percentile(sorted, 99);
    console.log(
      `concurrency: ${CLIENTS} streams x 32 tokens in ${wall.toFixed(2)} s = ` +
        `${((CLIENTS * 32) / wall).toFixed(0)} tok/s; /health p50 ${
          percentile(sorted, 50).toFixed(1)
        } ms ` +
        `p99 ${p99.toFixed(1)} ms over ${sorted.length} polls; TTFT p50 ${
          percentile(ttft, 50).toFixed(0)
        } ms ` +
        `p99 ${percentile(ttft, 99).toFixed(0)} ms`,
    );
    assert(answeredDuringLoad >= 2, `/health answered ${answeredDuringLoad} times during the load`);
    assert(statuses.every((s) => s === 200), `/health statuses ${statuses}`);
    const h = (await jsonOf(await node.get("/health")) as { models: Json[] }).models[0];
    assertEquals([h.in_flight, h.queue_depth], [0, 0]);
    assert((h.tok_s_decode as number) > 0 && (h.tok_s_prefill as number) > 0, JSON.stringify(h));
  });
});

Deno.test("admission: a full queue and a wait that runs out answer 503 with Retry-After", async () => {
  await withNode(
    nativeNode({ maxInFlight: 1, maxQueueDepth: 1, maxWaitSecs: 0.5 }),
    async (node) => {
      const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
      const health = async () =>
        (await jsonOf(await node.get("/health")) as { models: Json[] }).models[0];
      const body = (max: number) => ({
        model,
        messages: [{ role: "user", content: "Hello!" }],
        max_tokens: max,
      });
      const ac = new AbortController();
      const long = await node.post("/v1/chat/completions", { ...body(900), stream: true }, {
        signal: ac.signal,
      });
      assertEquals(long.status, 200);
      await eventually(async () => (await health()).in_flight === 1 || undefined, 2000, "running");

      const queued = v1(node, "chat/completions", body(2));
      await eventually(async () => (await health()).queue_depth === 1 || undefined, 2000, "queued");
      const full = await v1(node, "chat/completions", body(2));
      assertEquals(full.status, 503);
      const retry = Number(full.headers.get("retry-after"));
      assert(Number.isInteger(retry) && retry >= 1, `Retry-After ${retry}`);
      const fullErr = (await jsonOf(full) as { error: Json }).error;
      assertEquals([fullErr.code, fullErr.type], ["rate_limit_exceeded", "server_error"]);

      const timedOut = await queued;
      assertEquals(timedOut.status, 503);
      assert(Number(timedOut.headers.get("retry-after")) >= 1, "Retry-After on a timeout");
      const err = (await jsonOf(timedOut) as { error: Json }).error;
      assertEquals(err.code, "rate_limit_exceeded");
      assert(String(err.message).includes("waited 0.5 s"), String(err.message));

      ac.abort();
      await long.body?.cancel().catch(() => {});
      await eventually(async () => (await health()).in_flight === 0 || undefined, 2000, "drained");
      const ok = await v1(node, "chat/completions", body(2));
      assertEquals(ok.status, 200);
      await ok.body?.cancel();
    },
  );
});
