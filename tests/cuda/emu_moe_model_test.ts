/**
 * qwen3moe end to end on the emulated GPU against llama.cpp live: one prompt of the Q8_0
 * fixture (emulating the 151936-row output projection takes about a second a step), argmax
 * at every prompt position, top-20, and greedy steps decoded one token at a time, the later
 * ones replayed from a CUDA graph with the expert ids chosen on the device.
 */

import { assert } from "../support/assert.ts";
import { emulator, resetEmulator } from "./support.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { checkLive, liveGoldensInChild } from "../fixtures/moe/live_golden.ts";
import { MOE_TOLERANCE, moeFixture } from "../fixtures/moe/qwen3moe_tiny.ts";

const emu = await emulator();

Deno.test({
  name: "emulated CUDA: qwen3moe-tiny-q8_0 matches llama.cpp (positions, top-20, 6 greedy steps)",
  ignore: emu === null,
  async fn() {
    const name = "qwen3moe-tiny-q8_0";
    const path = moeFixture(name);
    // llama.cpp in a child: it cannot share this process with the emulator.
    const [golden] = await liveGoldensInChild(path, 6);
    resetEmulator(emu!);
    const be = emu!.backend();
    const file = openGguf(path);
    const model = readModel(file);
    const m = ModelInstance.create(model, be, { blockSize: 16, nBlocks: 16, dtype: "f16" });
    try {
      checkLive(m, golden, MOE_TOLERANCE[name], model.shape.vocabSize, "emulated CUDA");
      assert(be.stats().graphSteps >= 1, `no graph replay: ${JSON.stringify(be.stats())}`);
    } finally {
      m.close();
      be.close();
      file.close();
    }
  },
});
