/**
 * qwen3moe through the API: a node serving the Q8_0 fixture answers 16 completions sent
 * at once (the engine batches them, so every decode step routes 16 sequences' tokens
 * through the experts together, grouped by expert) with exactly the 32 greedy tokens
 * llama.cpp gives each prompt on its own, up to its first end-of-generation token.
 */

import { assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { nativeNode, v1 } from "../native/support.ts";
import { liveGoldens, MOE_PROMPTS } from "../fixtures/moe/live_golden.ts";
import { moeFixture } from "../fixtures/moe/qwen3moe_tiny.ts";

type Json = Record<string, unknown>;

/** llama.cpp's end-of-generation set for this vocabulary (fixtures/README.md). */
const EOG = new Set([128247, 151643, 151645, 151662, 151663, 151664]);

/** 16 prompts: the three of MOE_PROMPTS, cut at different lengths. */
function prompts(): Array<{ name: string; text: string }> {
  return Array.from({ length: 16 }, (_, i) => {
    const p = MOE_PROMPTS[i % 3];
    const cut = Math.max(12, Math.floor((p.text.length * (16 - i)) / 16));
    return { name: `${p.name}-${i}`, text: p.text.slice(0, cut) };
  });
}

Deno.test("qwen3moe e2e: 16 concurrent completions each equal llama.cpp's greedy tokens alone", async () => {
  const path = moeFixture("qwen3moe-tiny-q8_0");
  const goldens = await liveGoldens(path, 32, prompts());
  const dir = path.slice(0, path.lastIndexOf("/"));
  await withNode(nativeNode({ maxInFlight: 16, extra: { model_dirs: [dir] } }), async (node) => {
    const res = await node.post("/models/load", { model_id: path, harness: "native" });
    assertEquals(res.status, 200, await res.clone().text());
    await res.body?.cancel();
    await Promise.all(goldens.map(async (g) => {
      const ids = g.greedy.map((s) => s.id);
      const eog = ids.findIndex((id) => EOG.has(id));
      const want = eog < 0 ? ids : ids.slice(0, eog + 1);
      const r = await v1(node, "completions", {
        model: path,
        prompt: g.tokens,
        temperature: 0,
        max_tokens: 32,
        logprobs: 0,
        return_tokens_as_token_ids: true,
      });
      const body = await jsonOf(r) as Json;
      assertEquals(r.status, 200, JSON.stringify(body));
      const tokens = ((body.choices as Json[])[0].logprobs as { tokens: string[] }).tokens;
      assertEquals(tokens.map((t) => Number(t.slice("token_id:".length))), want, g.name);
    }));
  });
});
