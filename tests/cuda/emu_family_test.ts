/**
 * Llama 3, Mistral, Qwen2.5 and Gemma 3 on the emulated GPU against llama.cpp, live, for
 * every fixture quantization: one prompt that crosses Gemma 3's sliding window, its greedy
 * steps identical and their top-5 logits within the fixture's tolerance (emulating a
 * 128k-262k-row output projection takes seconds per step; every prompt of every family runs
 * on the native CPU backend in tests/models/family_test.ts).
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { FAMILIES, familyFixture, FIXTURE_QUANTS } from "../fixtures.ts";
import { withSession } from "../models/session.ts";
import { FAMILY_TOLERANCE } from "../models/family_prompts.ts";

const emu = await emulator();
const STEPS = 4;
const PROMPT = "The quick brown fox jumps over the lazy dog.";

for (const family of FAMILIES) {
  for (const quant of FIXTURE_QUANTS) {
    Deno.test({
      name: `emulated CUDA: ${family}-tiny-${quant} greedy steps equal llama.cpp's`,
      ignore: emu === null,
      async fn() {
        const path = await familyFixture(family, quant);
        using ref = await openLlamaModel(path);
        const ids = ref.tokenize(PROMPT, { special: true, addSpecial: true });
        const want = ref.greedy(ids, STEPS);
        resetEmulator(emu!);
        const got = withSession(path, emu!.backend(), (s) => s.greedy(ids, STEPS));
        assertEquals(got.ids, want.map((w) => w.id), "greedy tokens");
        want.forEach((step, k) => {
          const d = Math.max(...step.top5.map(([id, l]) => Math.abs(got.logits[k][id] - l)));
          assert(d <= FAMILY_TOLERANCE[quant], `step ${k}: top-5 logits differ by ${d}`);
        });
      },
    });
  }
}
