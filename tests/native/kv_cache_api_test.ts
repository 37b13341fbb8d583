/**
 * The KV cache through the API: a load's `kv_type` (or `[harness.native] kv_type`) picks the
 * cache type, /models reports the pool (type, bytes, positions, a position's bytes, and a
 * 32k and a 128k-token context's), a quantized cache serves requests, an unknown type is
 * refused, and a pool larger than the host's memory is refused at load (507), before any
 * allocation, the model listed as failed with the numbers.
 */

import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { fixture } from "../fixtures.ts";
import { nativeNode, v1 } from "./support.ts";

type Json = Record<string, unknown>;

/** qwen3-small: 2 layers of 2 KV heads of 64, K and V. */
function bytesPerPosition(type: "f16" | "q8_0" | "q4_0"): number {
  const row = { f16: 64 * 2, q8_0: 2 * 34, q4_0: 2 * 18 }[type];
  return 2 * 2 * 2 * row;
}

async function kvCache(node: { get(p: string): Promise<Response> }): Promise<Json> {
  const list = await jsonOf(await node.get("/models")) as Json[];
  return list[0].kv_cache as Json;
}

Deno.test("api: kv_type per load and per node; /models reports the pool; quantized caches serve", async () => {
  const model = fixture("qwen3-small-q4_k_m.gguf");
  await withNode(nativeNode({ extra: { kv_type: "q4_0" } }), async (node) => {
    for (const type of ["q8_0", undefined] as const) {
      const res = await node.post("/models/load", {
        model_id: model,
        harness: "native",
        ...(type ? { kv_type: type } : {}),
      });
      assertEquals(res.status, 200, await res.clone().text());
      await res.body?.cancel();
      const want = type ?? "q4_0";
      const kv = await kvCache(node);
      const per = bytesPerPosition(want);
      assertEquals(kv.type, want);
      assertEquals(kv.bytes_per_position, per);
      assertEquals(kv.bytes, per * (kv.positions as number));
      assert((kv.positions as number) >= 1024, `positions ${kv.positions}`);
      assertEquals(kv.context_bytes, { "32768": 32768 * per, "131072": 131072 * per });
      const chat = await v1(node, "chat/completions", {
        model,
        messages: [{ role: "user", content: "Hello!" }],
        max_tokens: 8,
        temperature: 0,
      });
      const body = await jsonOf(chat) as { choices: { message: { content: string } }[] };
      assertEquals(chat.status, 200);
      assert(body.choices[0].message.content.length > 0, "some text came back");
      const unload = await node.post("/models/unload", { model_id: model });
      assertEquals(unload.status, 200);
      await unload.body?.cancel();
    }
    const bad = await node.post("/models/load", {
      model_id: model,
      harness: "native",
      kv_type: "q5_1",
    });
    assertEquals(bad.status, 422);
    await bad.body?.cancel();
  });
});

Deno.test("api: a KV pool beyond the host's memory is refused at load with 507 and the numbers", async () => {
  await withNode(nativeNode({ extra: { kv_budget_mb: 64 * 1024 * 1024 } }), async (node) => {
    const model = fixture("qwen3-small-q4_k_m.gguf");
    const huge = await node.post("/models/load", { model_id: model, harness: "native" });
    const body = await jsonOf(huge) as Json;
    assertEquals([huge.status, body.code], [507, "insufficient_memory"]);
    assertStringIncludes(String(body.error), "the KV cache needs");
    const [m] = await jsonOf(await node.get("/models")) as Json[];
    assertEquals([m.status, (m.servable as Json).reason], ["failed", "load_failed"]);
    assertStringIncludes(String(m.error), "available");
  });
});
