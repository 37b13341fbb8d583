/**
 * Rope scaling asked for at load: Qwen3's own files stop at 40960 positions, and a load
 * that turns YaRN on (factor 4 over 32768, as its model card says) serves 131072 when the
 * node's context_length allows it, the KV pool sized for that; a scaling no model can
 * take is refused (422, naming the field) before anything loads.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { fixture } from "../fixtures.ts";
import { nativeNode, v1 } from "./support.ts";

type Json = Record<string, unknown>;
const MIB = 1024 * 1024;
const YARN = { type: "yarn", factor: 4, original_context_length: 32768 };

Deno.test("native: rope_scaling yarn at load serves Qwen3 at 131072 positions", async () => {
  const model = fixture("qwen3-tiny-q8_0.gguf");
  await withNode(nativeNode({ contextLength: 131072 }), async (node) => {
    const describe = async (body: Json): Promise<Json> => {
      const res = await node.post("/models/load", { model_id: model, harness: "native", ...body });
      assertEquals(res.status, 200, await res.clone().text());
      await res.body?.cancel();
      const [m] = await jsonOf(await node.get("/models")) as Json[];
      const unload = await node.post("/models/unload", { model_id: model });
      await unload.body?.cancel();
      return m;
    };
    const plain = await describe({});
    assertEquals(plain.limit, { context: 40960, output: 40960 });
    const res = await node.post("/models/load", {
      model_id: model,
      harness: "native",
      rope_scaling: YARN,
    });
    assertEquals(res.status, 200, await res.clone().text());
    await res.body?.cancel();
    const [m] = await jsonOf(await node.get("/models")) as Json[];
    assertEquals(m.limit, { context: 131072, output: 131072 });
    // The pool holds one whole context: 2 layers x 2 KV heads x 32 x (K, V) x f16 a token.
    const kv = 131072 * 2 * 2 * 32 * 2 * 2;
    assert((m.memory_bytes as number) > kv, `memory_bytes ${m.memory_bytes} < ${kv / MIB} MiB`);
    const chat = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 4,
    });
    assertEquals(chat.status, 200, await chat.clone().text());
    await chat.body?.cancel();
  });
});

Deno.test("native: a rope_scaling no model can take is refused, and nothing loads", async () => {
  const model = fixture("qwen3-tiny-q8_0.gguf");
  await withNode(nativeNode(), async (node) => {
    for (
      const bad of [
        { ...YARN, type: "longrope" },
        { ...YARN, factor: 0.5 },
        { ...YARN, original_context_length: 0 },
        { ...YARN, beta_fast: 8 },
      ]
    ) {
      const res = await node.post("/models/load", {
        model_id: model,
        harness: "native",
        rope_scaling: bad,
      });
      const body = await jsonOf(res) as Json;
      assertEquals(res.status, 422, JSON.stringify(bad));
      assert(String(body.error).includes("rope_scaling"), String(body.error));
    }
    assertEquals(await jsonOf(await node.get("/models")), []);
  });
});
