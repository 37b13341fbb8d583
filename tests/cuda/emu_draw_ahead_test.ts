/**
 * A CUDA runner has no pool of its backend's to lend, so it draws a step's sampled rows on
 * host threads of its own (runner/host_draws.ts): on the emulated GPU its drawRows gives the
 * CPU pool's tokens. The engine's use of drawRows is the same whatever the device
 * (draw_ahead_test runs it on the CPU).
 */

import { assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { LOGIT_ROWS, packDraws } from "../support/logit_rows.ts";
import { emulator, resetEmulator } from "./support.ts";
import { CpuKernels } from "../../src/backend/cpu/kernels.ts";
import { EXP_TABLE } from "../../src/engine/exp_table.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { openModel, openRunner } from "../../src/runner/mod.ts";

const emu = await emulator();

Deno.test({
  name: "emulated CUDA: the runner draws sampled rows on host threads of its own, as the CPU pool",
  ignore: emu === null,
  fn() {
    resetEmulator(emu!);
    const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
    const kv = { blockSize: 16, nBlocks: 16, dtype: "f16" as const };
    const runner = openRunner(model, { ...emu!.runner, threads: 2 }, kv);
    const pool = new CpuKernels().createPool(1);
    try {
      assertEquals(runner.device, "cuda");
      const rng = new Rng(9);
      const width = model.shape.vocabSize;
      const rows = new Float32Array(3 * width);
      for (let r = 0; r < 3; r++) rows.set(LOGIT_ROWS.peaked(rng, width), r * width);
      const which = Int32Array.of(2, 0, 1, 2);
      const params = packDraws(
        Array.from(which, () => ({
          temperature: 1.3,
          cutoff: 30,
          topK: 0,
          topP: 0.9,
          minP: 0,
          u: rng.float(),
        })),
      );
      assertEquals(
        Array.from(runner.drawRows!(rows, width, which, params, EXP_TABLE)),
        Array.from(pool.drawRows(rows, width, which, params, EXP_TABLE)),
      );
    } finally {
      pool.destroy();
      runner.close();
      model.file.close();
    }
  },
});
