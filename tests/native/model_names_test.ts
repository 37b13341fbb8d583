/**
 * The names a model answers to: loaded by a path, its id is the file's real path, so two
 * spellings of one file are one model; a `served_name` (llama-server's --alias, vLLM's
 * --served-model-name) is listed and serves requests, endpoints and unloads, as the
 * spelling the model was loaded with does.
 */

import { assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { fixture, FIXTURES } from "../fixtures.ts";
import { nativeNode, v1 } from "./support.ts";

type Json = Record<string, unknown>;

Deno.test("model names: one file is one model, whatever the spelling; served_name is an alias", async () => {
  await withNode(nativeNode(), async (node) => {
    const real = fixture("qwen3-tiny-q8_0.gguf");
    const spelled = `${FIXTURES}/golden/../qwen3-tiny-q8_0.gguf`;
    const load = await node.post("/models/load", {
      model_id: spelled,
      harness: "native",
      served_name: "tiny",
    });
    assertEquals(load.status, 200, await load.text());
    const again = await node.post("/models/load", { model_id: real, harness: "native" });
    const body = await jsonOf(again) as Json;
    assertEquals([again.status, body.code], [409, "already_loaded"]);

    const models = await jsonOf(await node.get("/models")) as Json[];
    assertEquals(models.map((m) => [m.id, m.served_name, m.status]), [[real, "tiny", "loaded"]]);
    const v1models = await jsonOf(await node.get("/v1/models")) as { data: Json[] };
    assertEquals(v1models.data.map((m) => m.id), ["tiny"]);

    for (const name of ["tiny", real, spelled]) {
      const res = await v1(node, "chat/completions", {
        model: name,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 2,
      });
      const answer = await jsonOf(res) as Json;
      assertEquals([res.status, answer.model], [200, name], name);
      const endpoint = await node.get(`/models/${encodeURIComponent(name)}/endpoint`);
      assertEquals(endpoint.status, 200, name);
      await endpoint.body?.cancel();
    }
    assertEquals((await node.get("/v1/models/tiny")).status, 200);

    // A second model may not take the name.
    const other = await node.post("/models/load", {
      model_id: fixture("qwen3-tiny-q4_0.gguf"),
      harness: "native",
      served_name: "tiny",
    });
    const taken = await jsonOf(other) as Json;
    assertEquals([other.status, taken.code], [409, "served_name_taken"]);

    const unload = await node.post("/models/unload", { model_id: "tiny" });
    assertEquals(unload.status, 200);
    await unload.body?.cancel();
    assertEquals(await jsonOf(await node.get("/models")), []);
    const gone = await v1(node, "chat/completions", {
      model: "tiny",
      messages: [{ role: "user", content: "Hi" }],
    });
    assertEquals(gone.status, 404);
    await gone.body?.cancel();
  });
});

Deno.test("model names: [[default_models]] take a served_name too", async () => {
  await withNode({
    ...nativeNode(),
    default_models: [{
      model_id: fixture("qwen3-tiny-q8_0.gguf"),
      harness: "native",
      served_name: "default-tiny",
    }],
  }, async (node) => {
    await node.activated;
    const v1models = await jsonOf(await node.get("/v1/models")) as { data: Json[] };
    assertEquals(v1models.data.map((m) => m.id), ["default-tiny"]);
  });
});
