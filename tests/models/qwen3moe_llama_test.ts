/**
 * The qwen3moe forward pass against llama.cpp live, on every qwen3moe fixture and on the
 * native CPU backend and the reference: the argmax at every prompt position (the prompt in
 * one batch, so many tokens share experts), the last position's top 20 logits within the
 * fixture's tolerance, and 32 greedy steps decoded one token at a time, identical, each
 * step's top 5 within the tolerance. The fixtures route decisively (moe_weights.ts) and a
 * wrong expert, a missing renormalisation or a missing MoE moves the top logits by 1 to 7,
 * far above the tolerances; the test also checks the fixture still gives llama.cpp wide
 * greedy margins, so that it keeps telling right from wrong.
 */

import { assert } from "../support/assert.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { ReferenceBackend } from "../../src/backend/reference/reference_backend.ts";
import type { Backend } from "../../src/backend/backend.ts";
import { checkLive, liveGoldens } from "../fixtures/moe/live_golden.ts";
import { MOE_FIXTURES, MOE_TOLERANCE, moeFixture } from "../fixtures/moe/qwen3moe_tiny.ts";

const BLOCK = 16;
const MAX_TOKENS = 256;

function withInstance(
  path: string,
  backend: Backend,
  fn: (m: ModelInstance, vocab: number) => void,
) {
  const file = openGguf(path);
  const model = readModel(file);
  const kv = { blockSize: BLOCK, nBlocks: MAX_TOKENS / BLOCK, dtype: "f16" as const };
  const m = ModelInstance.create(model, backend, kv);
  try {
    fn(m, model.shape.vocabSize);
  } finally {
    m.close();
    backend.close();
    file.close();
  }
}

for (const name of MOE_FIXTURES) {
  Deno.test(`${name}: CPU and reference match llama.cpp (argmax per position, top-20, 32 greedy steps)`, async () => {
    const path = moeFixture(name);
    const goldens = await liveGoldens(path);
    for (const g of goldens) {
      const margin = Math.min(...g.greedy.map((s) => s.margin));
      assert(margin >= 5, `${name} ${g.name}: the fixture's greedy margin fell to ${margin}`);
    }
    for (const mmap of [true, false]) {
      withInstance(path, new CpuBackend({ threads: 2, mmap }), (m, vocab) => {
        for (const g of goldens) checkLive(m, g, MOE_TOLERANCE[name], vocab, `cpu mmap=${mmap}`);
      });
    }
    withInstance(path, new ReferenceBackend(), (m, vocab) => {
      checkLive(m, goldens[0], MOE_TOLERANCE[name], vocab, "reference");
    });
  });
}
