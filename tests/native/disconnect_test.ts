/**
 * A client that goes away mid-stream stops its generation within one token: the model's
 * in_flight is back to 0 within 100 ms plus one token time, no more tokens are generated
 * for it, and the next request is served.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { parsePrometheus } from "../support/prometheus.ts";
import { loadFixture, nativeNode, v1 } from "./support.ts";

type Json = Record<string, unknown>;

async function modelHealth(node: TestNode): Promise<Json> {
  return (await jsonOf(await node.get("/health")) as { models: Json[] }).models[0];
}

async function completionTokens(node: TestNode): Promise<number> {
  const fams = parsePrometheus(await (await node.get("/metrics")).text());
  return fams.get("neuron_model_tokens_total")!.samples
    .find((s) => s.labels.kind === "completion")?.value ?? 0;
}

Deno.test("disconnect: aborting a stream after 3 chunks frees the model within a token", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const res = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 800,
      temperature: 0,
      stream: true,
    });
    assertEquals(res.status, 200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    const at: number[] = [];
    while (at.length < 4) {
      const { value } = await reader.read();
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        if (buf.startsWith("data: ")) at.push(performance.now());
        buf = buf.slice(cut + 2);
      }
    }
    // Chunks 2..4 are content deltas, one token each.
    const tokenMs = Math.max(at[2] - at[1], at[3] - at[2]);
    assertEquals((await modelHealth(node)).in_flight, 1);
    const t0 = performance.now();
    await reader.cancel();
    // Polled tightly: the measure is the node's, not the poll interval's.
    while ((await modelHealth(node)).in_flight !== 0) {
      if (performance.now() - t0 > 2000) throw new Error("in_flight stayed above 0");
      await new Promise((r) => setTimeout(r, 2));
    }
    const freedMs = performance.now() - t0;
    console.log(
      `disconnect: in_flight back to 0 after ${freedMs.toFixed(1)} ms (one token ${
        tokenMs.toFixed(1)
      } ms)`,
    );
    assert(
      freedMs < 100 + tokenMs,
      `freed after ${freedMs.toFixed(1)} ms, token time ${tokenMs.toFixed(1)} ms`,
    );

    // Nothing more is generated for the abandoned request.
    const before = await completionTokens(node);
    await new Promise((r) => setTimeout(r, 10 * tokenMs + 50));
    assertEquals(await completionTokens(node), before);
    assert(before < 800, `${before} tokens were generated, not the 800 asked for`);

    const next = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 5,
    });
    assertEquals(next.status, 200);
    assertEquals(((await jsonOf(next) as Json).usage as Json).completion_tokens, 5);
    const fams = parsePrometheus(await (await node.get("/metrics")).text());
    const outcomes = Object.fromEntries(
      fams.get("neuron_model_requests_total")!.samples.map((s) => [s.labels.outcome, s.value]),
    );
    assertEquals([outcomes.cancelled, outcomes.completed], [1, 1]);
  });
});

Deno.test("disconnect: a non-streaming client that leaves stops its generation too", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const ac = new AbortController();
    const pending = node.post("/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 800,
    }, { signal: ac.signal }).catch((err) => err);
    await eventually(
      async () => (await modelHealth(node)).in_flight === 1 || undefined,
      2000,
      "running",
    );
    ac.abort();
    assert((await pending) instanceof Error, "the client saw its own abort");
    await eventually(
      async () => (await modelHealth(node)).in_flight === 0 || undefined,
      1000,
      "in_flight 0",
    );
    const before = await completionTokens(node);
    assert(before < 800, `${before} tokens generated`);
  });
});
