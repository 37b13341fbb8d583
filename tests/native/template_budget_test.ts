/**
 * A chat template that loops, or builds without end, comes from the model file, and a
 * request triggers it: it is stopped by its render budget with `chat_template_failed`,
 * the model keeps serving everything else, and unloading it ends its Worker.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { fixture } from "../fixtures.ts";
import { nativeNode, v1 } from "./support.ts";
import { Kv } from "../../src/gguf/mod.ts";

const TEMPLATES: Record<string, string> = {
  // 10^12 iterations, each range well within its item limit.
  loop: "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
  // One range of 10^10 items: a list that alone would take 80 GB.
  range: "{% for i in range(10000000000) %}x{% endfor %}",
  // A string that doubles until memory runs out.
  grow: "{% set ns = namespace(s='xx') %}{% for i in range(100) %}" +
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
};

Deno.test("chat templates that loop or grow are stopped; the model keeps serving", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const paths = Object.entries(TEMPLATES).map(([name, source]) =>
      writeVariant(fixture("qwen3-tiny-q8_0.gguf"), `${dir}/${name}.gguf`, (kv) => {
        kv.set("tokenizer.chat_template", Kv.string(source));
      })
    );
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      for (const path of paths) {
        const load = await node.post("/models/load", { model_id: path, harness: "native" });
        assertEquals(load.status, 200, await load.text());
        // A guard, not a measure: before budgets, this request never came back.
        const chat = await node.post("/v1/chat/completions", {
          model: path,
          messages: [{ role: "user", content: "Hello" }],
          max_tokens: 2,
        }, { signal: AbortSignal.timeout(120_000) });
        const body = await jsonOf(chat) as { error: { code: string; message: string } };
        assertEquals([chat.status, body.error.code], [500, "chat_template_failed"], path);
        assert(/chat template .* stopped/.test(body.error.message), body.error.message);
        // The same model still serves a prompt that needs no template.
        const text = await v1(node, "completions", { model: path, prompt: "Hi", max_tokens: 2 });
        assertEquals(text.status, 200, await text.clone().text());
        await text.body?.cancel();
        const unload = await node.post("/models/unload", { model_id: path });
        assertEquals(unload.status, 200);
        await unload.body?.cancel();
      }
      const models = await jsonOf(await node.get("/models")) as unknown[];
      assertEquals(models, []);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
