/**
 * Two CPU ranks against one: a golden prompt of the tiny f16 fixture evaluated by a
 * tensor-parallel runner over two processes and by a local runner, their logits compared
 * at every position, and the worker reaped on close.
 */

import { assert, assertEquals } from "../../support/assert.ts";
import { modelGolden } from "../../fixtures.ts";
import type { KvPoolSpec, Step } from "../../../src/backend/backend.ts";
import { argmax } from "../../../src/common/argmax.ts";
import type { GgufModel } from "../../../src/models/family.ts";
import { LocalRunner } from "../../../src/runner/mod.ts";
import { TpRunner, type TpRunnerOptions } from "../../../src/tp/tp_runner.ts";
import { workersOn } from "./children.ts";
import { withLogs } from "./logs.ts";

/** The tiny f16 fixture's tolerance on logits (fixtures README). */
const TOLERANCE = 0.05;

/**
 * Asserts that `model` split over ranks on devices [0, label] (`extra` options) gives one
 * rank's logits on the chat_multiturn prompt, within the fixture's tolerance, and the same
 * argmax everywhere.
 */
export function assertTwoRanksEqualOne(
  model: GgufModel,
  label: number,
  kv: KvPoolSpec,
  extra: Partial<TpRunnerOptions> = {},
): void {
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
    const tp = TpRunner.open(
      model,
      { device: "cpu", threads: 1, tensorParallel: 2, devices: [0, label], ...extra },
      kv,
    );
    const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, kv);
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
    }
    assertEquals(workersOn(label), [], "the worker is reaped on close");
  });
}
