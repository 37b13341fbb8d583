/**
 * A fixture golden end to end on the emulated GPU (one prompt of one model: emulating the
 * 151936-row output projection takes a second per step; every fixture and prompt runs in
 * `deno task test:gpu` on a real GPU): argmax at every prompt position, top-20 logits
 * within tolerance, and greedy steps, through cuBLAS prefill, q8_1 mat-vec decode, f16
 * KV cache and CUDA graph replay.
 */

import { assert } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { checkGolden } from "../gpu/checks/golden.ts";
import type { ModelFixture } from "../fixtures.ts";

const emu = await emulator();

const CASES: Array<[ModelFixture, string, number]> = [["qwen3-tiny-q8_0", "raw_random16", 5]];

for (const [model, prompt, steps] of CASES) {
  Deno.test({
    name:
      `emulated CUDA: ${model} ${prompt} matches llama.cpp (positions, top-20, ${steps} greedy steps)`,
    ignore: emu === null,
    fn() {
      resetEmulator(emu!);
      const be = emu!.backend();
      try {
        const report = checkGolden(be, model, { prompts: [prompt], greedySteps: steps });
        assert(report.prompts === 1);
        if (steps >= 5) {
          assert(be.stats().graphSteps >= 1, `no graph replay: ${JSON.stringify(be.stats())}`);
        }
      } finally {
        be.close();
      }
    },
  });
}
