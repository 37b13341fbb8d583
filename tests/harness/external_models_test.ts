/**
 * Loading and unloading through an external harness, for each kind of upstream: llama-server
 * in router mode (`POST /models/{load,unload}`, finished after the answer), and servers that
 * cannot do either (vLLM), which must say so plainly. mistral.rs is covered in
 * external_test.ts.
 */
import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf } from "../support/node.ts";
import { type Json, MODEL, modelsById, withUpstream } from "./upstream_node.ts";

const OTHER = "other/model";

Deno.test("external (llama_router): states come from llama-server's status objects", async () => {
  await withUpstream(
    { models: [MODEL], unloaded: [OTHER], api: "llama_router" },
    async (_up, node) => {
      const byId = await modelsById(node);
      assertEquals(byId[MODEL].status, "loaded");
      assertEquals(byId[MODEL].harness, "llama");
      assertEquals(byId[OTHER].status, "unloaded");
      const off = await node.get("/models/other%2Fmodel/endpoint");
      assertEquals(off.status, 404);
      await off.body?.cancel();
    },
    {},
    "llama",
  );
});

Deno.test("external (llama_router): load and unload answer once llama-server is done", async () => {
  await withUpstream(
    { models: [MODEL], unloaded: [OTHER], api: "llama_router", settleMs: 300 },
    async (up, node) => {
      const aliased = await node.post("/models/load", {
        model_id: OTHER,
        harness: "llama",
        served_name: "short",
      });
      assertEquals(aliased.status, 400);
      assertEquals((await jsonOf(aliased) as Json).code, "served_name_unsupported");
      const load = await node.post("/models/load", { model_id: OTHER, harness: "llama" });
      assertEquals(await jsonOf(load), { status: "loaded" });
      // The answer came after llama-server finished, not when it accepted.
      assertEquals((await up.events()).filter((e) => e.endsWith(OTHER)), [
        `load ${OTHER}`,
        `loaded ${OTHER}`,
      ]);
      assertEquals((await modelsById(node))[OTHER].status, "loaded");
      const ep = await node.get("/models/other%2Fmodel/endpoint");
      assertEquals(ep.status, 200);
      await ep.body?.cancel();

      const unload = await node.post("/models/unload", { model_id: OTHER });
      assertEquals(await jsonOf(unload), { status: "unloaded" });
      assertEquals((await up.events()).filter((e) => e.endsWith(OTHER)).slice(2), [
        `unload ${OTHER}`,
        `unloaded ${OTHER}`,
      ]);
      assertEquals((await modelsById(node))[OTHER].status, "unloaded");
      const gone = await node.get("/models/other%2Fmodel/endpoint");
      assertEquals(gone.status, 404);
      await gone.body?.cancel();
    },
    {},
    "llama",
  );
});

Deno.test("external (llama_router): a load llama-server gives up on is model_load_failed", async () => {
  await withUpstream(
    { models: [MODEL], failing: ["broken/model"], api: "llama_router", settleMs: 100 },
    async (_up, node) => {
      const res = await node.post("/models/load", { model_id: "broken/model", harness: "llama" });
      assertEquals(res.status, 500);
      const body = await jsonOf(res) as Json;
      assertEquals(body.code, "model_load_failed");
      assertStringIncludes(String(body.error), "exited with 1");
      const m = (await modelsById(node))["broken/model"];
      assertEquals(m.status, "failed");
      assertEquals((m.servable as Json).ok, false);

      const unknown = await node.post("/models/load", { model_id: "no/such", harness: "llama" });
      assertEquals(unknown.status, 404);
      assertEquals((await jsonOf(unknown) as Json).code, "model_not_found");
    },
    {},
    "llama",
  );
});

Deno.test("external (none): an upstream without model management says it cannot unload", async () => {
  await withUpstream(
    { models: [MODEL], api: "none" },
    async (up, node) => {
      const res = await node.post("/models/unload", { model_id: MODEL });
      assertEquals(res.status, 501);
      const body = await jsonOf(res) as Json;
      assertEquals(body.code, "unload_unsupported");
      assertStringIncludes(String(body.error), "this upstream");
      assertStringIncludes(String(body.error), "cannot unload models");
      // Nothing was asked of the upstream, and the model is still served.
      assertEquals((await up.events()).filter((e) => e.includes("unload")), []);
      assertEquals((await modelsById(node))[MODEL].status, "loaded");

      const load = await node.post("/models/load", { model_id: OTHER, harness: "vllm" });
      assertEquals(load.status, 404);
      const loadBody = await jsonOf(load) as Json;
      assertEquals(loadBody.code, "model_not_found");
      assertStringIncludes(String(loadBody.error), "cannot load models");
    },
    {},
    "vllm",
  );
});
