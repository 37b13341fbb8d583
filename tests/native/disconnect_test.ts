/**
 * A client that goes away mid-stream stops its generation within a few tokens: the request
 * ends having generated a small bounded number of the 800 tokens it asked for, the model's
 * in_flight goes back to 0, no more tokens are generated for it, and the next request is
 * served. The bound is on work (tokens), not on milliseconds: a busy machine slows the node's
 * generation and its noticing of the disconnect alike, but not the client's clock.
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

Deno.test("disconnect: aborting a stream after 3 chunks stops its generation within a few tokens", async () => {
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
    let chunks = 0;
    while (chunks < 4) {
      const { value } = await reader.read();
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        if (buf.startsWith("data: ")) chunks++;
        buf = buf.slice(cut + 2);
      }
    }
    assertEquals((await modelHealth(node)).in_flight, 1);
    await reader.cancel();
    await eventually(
      async () => (await modelHealth(node)).in_flight === 0 || undefined,
      10_000,
      "in_flight 0",
    );
    const generated = await completionTokens(node);
    console.log(`disconnect: ${generated} tokens generated for a client that read 4 chunks`);
    // 4 read, the rest the node made before it saw the socket close: a node that missed it
    // would run to the 800 asked for.
    assert(generated <= 64, `${generated} tokens were generated, not at most 64`);

    // Nothing more is generated for the abandoned request.
    await new Promise((r) => setTimeout(r, 200));
    assertEquals(await completionTokens(node), generated);

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
      10_000,
      "running",
    );
    ac.abort();
    assert((await pending) instanceof Error, "the client saw its own abort");
    await eventually(
      async () => (await modelHealth(node)).in_flight === 0 || undefined,
      10_000,
      "in_flight 0",
    );
    const before = await completionTokens(node);
    assert(before < 800, `${before} tokens generated`);
  });
});
