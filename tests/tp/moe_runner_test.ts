/**
 * qwen3moe split over two CPU ranks (every rank holds a slice of every expert, the router
 * whole): llama.cpp's answers and one rank's on the fixtures (last-position top-20 within
 * the fixture tolerance, two ranks within it of one, the 32 greedy steps identical), a step
 * of several sequences equal to one rank's, and experts whose columns split unevenly in
 * whole Q4_K blocks (768 = three blocks: 256 and 512) giving one rank's answers.
 */

import { assert, assertEquals } from "../support/assert.ts";
import type { Step, StepLayout } from "../../src/backend/backend.ts";
import { LocalRunner, type ModelRunner, openModel } from "../../src/runner/mod.ts";
import { argmax } from "../../src/common/argmax.ts";
import { expertFfSpan } from "../../src/models/expert_shard.ts";
import { readMoeHparams } from "../../src/models/moe_hparams.ts";
import { TpRunner } from "../../src/tp/tp_runner.ts";
import { type LiveGolden, liveGoldens } from "../fixtures/moe/live_golden.ts";
import {
  MOE_TOLERANCE,
  type MoeFixture,
  moeFixture,
  writeMoeModel,
} from "../fixtures/moe/qwen3moe_tiny.ts";
import { workersOn } from "./support/children.ts";
import { withLogs } from "./support/logs.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 17;
const KV = { blockSize: 16, nBlocks: 32, dtype: "f16" as const };
const TABLE = Int32Array.from({ length: KV.nBlocks }, (_, i) => i);

function batch(ids: ArrayLike<number>, start: number, logitRows: number[]): Step {
  const layout: StepLayout = {
    positions: Int32Array.from(ids, (_, i) => start + i),
    sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: TABLE }],
  };
  return { ids: Int32Array.from(ids), layout, logitRows: Int32Array.from(logitRows) };
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

function topDiff(logits: Float32Array, expected: Array<[number, number]>): number {
  return Math.max(...expected.map(([id, l]) => Math.abs(logits[id] - l)));
}

/** Prefill and n greedy steps on both runners; two ranks stay within `tol` of one. */
function greedyBoth(tp: ModelRunner, one: ModelRunner, tokens: number[], n: number, tol: number) {
  const steps: Float32Array[] = [];
  const ids: number[] = [];
  const oneIds: number[] = [];
  let b = batch(tokens, 0, [tokens.length - 1]);
  for (let k = 0; k < n; k++) {
    const [a, o] = [tp.forward(b), one.forward(b)];
    const d = maxDiff(a, o);
    assert(d <= tol, `step ${k}: two ranks and one differ by ${d}`);
    steps.push(a);
    ids.push(argmax(a));
    oneIds.push(argmax(o));
    b = batch([ids[k]], tokens.length + k, [0]);
  }
  assertEquals(ids, oneIds, "two ranks and one choose alike");
  return { ids, steps };
}

function withRunners(path: string, fn: (tp: TpRunner, one: LocalRunner) => void): void {
  withLogs(() => {
    const model = openModel(path);
    const tp = TpRunner.open(
      model,
      { device: "cpu", threads: 1, tensorParallel: 2, devices: [0, LABEL] },
      KV,
    );
    const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, KV);
    try {
      fn(tp, one);
    } finally {
      tp.close();
      one.close();
      model.file.close();
    }
    assertEquals(workersOn(LABEL), [], "the worker is reaped on close");
  });
}

function checkGolden(tp: TpRunner, one: LocalRunner, g: LiveGolden, tol: number): void {
  const { ids, steps } = greedyBoth(tp, one, g.tokens, g.greedy.length, tol);
  const d = topDiff(steps[0], g.lastTop20);
  assert(d <= tol, `${g.name}: top-20 logits differ from llama.cpp by ${d} > ${tol}`);
  steps.forEach((s, k) => {
    const e = topDiff(s, g.greedy[k].top5);
    assert(e <= tol, `${g.name}: greedy step ${k} top-5 differs from llama.cpp by ${e}`);
  });
  assertEquals(ids, g.greedy.map((s) => s.id), `${g.name}: greedy continuation`);
}

for (const name of ["qwen3moe-tiny-f16", "qwen3moe-tiny-q4_k_m"] as MoeFixture[]) {
  Deno.test(`tp runner: ${name} on two ranks matches llama.cpp and one rank`, async () => {
    const path = moeFixture(name);
    const goldens = await liveGoldens(path);
    withRunners(path, (tp, one) => {
      for (const g of goldens) checkGolden(tp, one, g, MOE_TOLERANCE[name]);
      assertEquals(tp.failure, null);
    });
  });
}

Deno.test("tp runner: qwen3moe, a step of several sequences over paged blocks equals one rank's", () => {
  withRunners(moeFixture("qwen3moe-tiny-f16"), (tp, one) => {
    const rows = [[9707, 11, 1879, 0, 553, 264], [3838, 374, 279, 6722]];
    const tables = [Int32Array.of(7, 3), Int32Array.of(12)];
    const step = (parts: Array<{ seq: number; ids: number[]; start: number }>): Step => {
      const ids: number[] = [], positions: number[] = [], logitRows: number[] = [];
      const sequences: StepLayout["sequences"] = [];
      for (const r of parts) {
        sequences.push({ rowStart: ids.length, rowCount: r.ids.length, blockTable: tables[r.seq] });
        r.ids.forEach((id, i) => (ids.push(id), positions.push(r.start + i)));
        logitRows.push(ids.length - 1);
      }
      return {
        ids: Int32Array.from(ids),
        layout: { positions: Int32Array.from(positions), sequences },
        logitRows: Int32Array.from(logitRows),
      };
    };
    for (
      const s of [
        step([{ seq: 0, ids: rows[0], start: 0 }, { seq: 1, ids: rows[1], start: 0 }]),
        step([{ seq: 0, ids: [42], start: 6 }, { seq: 1, ids: [7], start: 4 }]),
        step([{ seq: 1, ids: [8, 9, 10], start: 5 }, { seq: 0, ids: [43], start: 7 }]),
      ]
    ) {
      const d = maxDiff(tp.forward(s), one.forward(s));
      assert(d < 1e-3, `batched step: two ranks and one differ by ${d}`);
    }
  });
});

Deno.test("tp runner: experts of three Q4_K blocks split 256 + 512 over two ranks and equal one rank", () => {
  const dir = Deno.makeTempDirSync({ prefix: "neuron-moe-tp-" });
  try {
    const path = `${dir}/uneven.gguf`;
    writeMoeModel(path, {
      hidden: 256,
      layers: 2,
      heads: 8,
      kvHeads: 2,
      headDim: 64,
      ffn: 768,
      experts: 8,
      expertsUsed: 2,
      expertFfn: 768,
      vocab: 2048,
      tiedOutput: false,
    }, "q4_k_m");
    const model = openModel(path);
    const hp = readMoeHparams(model.file, "qwen3moe");
    const spans = [0, 1].map((r) => expertFfSpan(model.file, hp, 2, r));
    model.file.close();
    assertEquals(spans, [{ start: 0, count: 256 }, { start: 256, count: 512 }]);
    withRunners(path, (tp, one) => {
      const { ids } = greedyBoth(tp, one, [300, 301, 302, 303, 304, 305, 306, 307], 16, 0.4);
      assertEquals(ids.length, 16);
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
