/**
 * Each model family through the OpenAI API at temperature 0: a chat's content is the text of
 * llama.cpp's greedy tokens on the same file (up to its first end-of-generation token), and
 * the finish reason says whether one came; the prompt is the node's own rendering of the
 * family's template, which the tokenizer and template tests tie to llama.cpp's.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { FAMILIES, familyFixture, familyFixtureDir } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { familyPrompts, promptText } from "../models/family_prompts.ts";
import { nativeNode } from "./support.ts";

type Json = Record<string, unknown>;
const MAX_TOKENS = 24;

Deno.test("chat at temperature 0 answers llama.cpp's greedy text, for every family", async () => {
  const paths = await Promise.all(FAMILIES.map((f) => familyFixture(f, "q8_0")));
  const dir = await familyFixtureDir();
  await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
    for (const [i, family] of FAMILIES.entries()) {
      const path = paths[i];
      const load = await node.post("/models/load", { model_id: path, harness: "native" });
      assertEquals(load.status, 200, `${family}: ${await load.clone().text()}`);
      await load.body?.cancel();
      using ref = await openLlamaModel(path);
      const file = openGguf(path);
      let words = 0;
      try {
        for (const p of familyPrompts(family).filter((q) => q.messages && !q.tools)) {
          const { text, addSpecial } = promptText(file, p);
          const ids = ref.tokenize(text, { special: true, addSpecial });
          const steps = ref.greedy(ids, MAX_TOKENS).map((s) => s.id);
          const end = steps.findIndex((id) => ref.isEog(id));
          const want = ref.detokenize(end < 0 ? steps : steps.slice(0, end));
          const res = await node.post("/v1/chat/completions", {
            model: path,
            messages: p.messages,
            temperature: 0,
            max_tokens: MAX_TOKENS,
          });
          const body = await jsonOf(res) as Json;
          assertEquals(res.status, 200, `${family} ${p.name}: ${JSON.stringify(body)}`);
          const choice = (body.choices as Json[])[0];
          const message = choice.message as Json;
          assertEquals(message.content, want, `${family} ${p.name}: content`);
          assertEquals(choice.finish_reason, end < 0 ? "length" : "stop", `${family} ${p.name}`);
          words += want.trim() === "" ? 0 : 1;
        }
        assert(words > 0, `${family}: every answer was empty, which proves nothing`);
      } finally {
        file.close();
      }
      const unload = await node.post("/models/unload", { model_id: path });
      await unload.body?.cancel();
    }
  });
});
