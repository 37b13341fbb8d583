/**
 * A quantized KV cache split over two CPU processes: each rank keeps its share of the KV
 * heads as q8_0 blocks (a head is whole blocks, so the split cuts no block), and two ranks
 * equal one rank with the same cache type.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import type { Step } from "../../src/backend/backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { LocalRunner, openModel } from "../../src/runner/mod.ts";
import { TpRunner } from "../../src/tp/tp_runner.ts";
import { workersOn } from "./support/children.ts";
import { withLogs } from "./support/logs.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 23;
const KV = { blockSize: 16, nBlocks: 64, dtype: "q8_0" as const };
/** The tiny f16 fixture's tolerance on logits (fixtures README). */
const TOLERANCE = 0.05;

Deno.test("tp runner: a q8_0 KV cache over two ranks equals one rank's", () => {
  const ids = modelGolden("qwen3-tiny-f16").prompts.find((p) => p.name === "chat_multiturn")!
    .tokens;
  const step: Step = {
    ids: Int32Array.from(ids),
    layout: {
      positions: Int32Array.from(ids, (_, i) => i),
      sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: Int32Array.of(0, 1, 2) }],
    },
    logitRows: Int32Array.from(ids, (_, i) => i),
  };
  withLogs(() => {
    const model = openModel(fixture("qwen3-tiny-f16.gguf"));
    const tp = TpRunner.open(
      model,
      { device: "cpu", threads: 1, tensorParallel: 2, devices: [0, LABEL] },
      KV,
    );
    const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, KV);
    try {
      assertEquals(tp.kvBytes, one.kvBytes, "the ranks' pools add up to one rank's");
      const [a, b] = [tp.forward(step), one.forward(step)];
      let worst = 0;
      for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
      assert(worst <= TOLERANCE, `two ranks and one differ by ${worst}`);
      const vocab = model.shape.vocabSize;
      const rows = (x: Float32Array) =>
        ids.map((_, r) => argmax(x.subarray(r * vocab, (r + 1) * vocab)));
      assertEquals(rows(a), rows(b));
      assertEquals(tp.failure, null);
    } finally {
      tp.close();
      one.close();
      model.file.close();
    }
    assertEquals(workersOn(LABEL), [], "the worker is reaped on close");
  });
});
