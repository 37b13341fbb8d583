/**
 * YaRN on the emulated GPU against llama.cpp, live: the Qwen3 fixture whose GGUF asks for
 * YaRN (factor 4 over 40960), a prompt at position 41000 with nothing before it (the rope
 * shifted on neuron's side as tests/models/shifted_rope.ts says), greedy steps identical
 * and their top-5 logits within the fixture's tolerance; the kernels' own YaRN checks are
 * emu_ops_test.ts's.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { modelGolden } from "../fixtures.ts";
import { writeYarnFixture } from "../fixtures/yarn.ts";
import { withSession } from "../models/session.ts";
import { shiftedRope } from "../models/shifted_rope.ts";

const emu = await emulator();
const STEPS = 4;
const START = 41000;
/** The tiny f16 fixture's tolerance on top logits (fixtures README). */
const TOLERANCE = 0.05;

Deno.test({
  name: "emulated CUDA: qwen3 with YaRN metadata, greedy steps at 41000 equal llama.cpp's",
  ignore: emu === null,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = writeYarnFixture(dir);
      const prompt = modelGolden("qwen3-tiny-f16").prompts.find((p) =>
        p.name === "chat_multiturn"
      )!;
      using ref = await openLlamaModel(path);
      const want = ref.greedy(prompt.tokens, STEPS, START);
      resetEmulator(emu!);
      const shift = shiftedRope(emu!.backend());
      shift.offset = START;
      const got = withSession(path, shift.backend, (s) => s.greedy(prompt.tokens, STEPS));
      assertEquals(got.ids, want.map((w) => w.id), "greedy tokens");
      want.forEach((step, k) => {
        const d = Math.max(...step.top5.map(([id, l]) => Math.abs(got.logits[k][id] - l)));
        assert(d <= TOLERANCE, `step ${k}: top-5 logits differ by ${d}`);
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
