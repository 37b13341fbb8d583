/**
 * Llama 3, Mistral, Qwen2.5 and Gemma 3 on the native CPU backend against llama.cpp itself,
 * live, on the same fixture files: for every prompt (text and chat), 32 greedy tokens
 * identical (prompt in one step, then one token per step) and the top-20 logits of every
 * step within the fixture's tolerance.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { openLlamaModel, topLogits } from "../support/llama_ref.ts";
import { FAMILIES, type Family, familyFixture, FIXTURE_QUANTS } from "../fixtures.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { FAMILY_TOLERANCE, familyPrompts, promptText } from "./family_prompts.ts";
import { withSession } from "./session.ts";

const STEPS = 32;

/** Each prompt as llama.cpp tokenizes it (special tokens parsed). */
function promptIds(family: Family, path: string, tokenize: (t: string, add: boolean) => number[]) {
  const file = openGguf(path);
  try {
    return familyPrompts(family).map((p) => {
      const { text, addSpecial } = promptText(file, p);
      return { name: p.name, ids: tokenize(text, addSpecial) };
    });
  } finally {
    file.close();
  }
}

for (const family of FAMILIES) {
  for (const quant of FIXTURE_QUANTS) {
    Deno.test(`${family}-tiny-${quant}: greedy and top-20 logits equal llama.cpp's on every prompt`, async () => {
      const path = await familyFixture(family, quant);
      using ref = await openLlamaModel(path);
      const prompts = promptIds(
        family,
        path,
        (t, add) => ref.tokenize(t, { special: true, addSpecial: add }),
      );
      withSession(path, new CpuBackend({ threads: 2 }), (s) => {
        for (const p of prompts) {
          const want = ref.greedy(p.ids, STEPS);
          const got = s.greedy(p.ids, STEPS);
          assertEquals(got.ids, want.map((w) => w.id), `${p.name}: greedy tokens`);
          const refLogits = ref.logits(p.ids);
          const diff = Math.max(
            ...topLogits(refLogits, 20).map(([id, l]) => Math.abs(got.logits[0][id] - l)),
          );
          assert(diff <= FAMILY_TOLERANCE[quant], `${p.name}: top-20 logits differ by ${diff}`);
          want.forEach((step, k) => {
            const d = Math.max(...step.top5.map(([id, l]) => Math.abs(got.logits[k][id] - l)));
            assert(
              d <= FAMILY_TOLERANCE[quant],
              `${p.name}: step ${k} top-5 logits differ by ${d}`,
            );
          });
        }
      });
    });
  }
}
