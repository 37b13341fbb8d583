/**
 * The tensor-parallel runner on the CPU: Qwen3 split over two processes gives llama.cpp's
 * answers and one rank's answers (every golden prompt: last-position top-20 logits within
 * the fixture tolerance, the 32-step greedy continuation identical), steps run in lockstep,
 * a continuous-batching step (several sequences, paged blocks) reaches the workers intact,
 * a step of final hidden states (embeddings) comes back from the leader as one rank's,
 * splits the model cannot take are refused before any process starts, and a killed worker
 * breaks the group cleanly.
 */
import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import {
  fixture,
  type GoldenPrompt,
  LOGIT_TOLERANCE,
  type ModelFixture,
  modelGolden,
} from "../fixtures.ts";
import type { Step, StepLayout } from "../../src/backend/backend.ts";
import { LocalRunner, type ModelRunner, openModel } from "../../src/runner/mod.ts";
import { argmax } from "../../src/common/argmax.ts";
import { ShardError } from "../../src/models/errors.ts";
import { TpError } from "../../src/tp/errors.ts";
import { TpRunner } from "../../src/tp/tp_runner.ts";
import { until, workersOn } from "./support/children.ts";
import { logged, withLogs } from "./support/logs.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 11;
const DEVICES = [0, LABEL];
const THREAD_LABEL = 14;
const BLOCK = 16;
const KV = { blockSize: BLOCK, nBlocks: 64, dtype: "f16" as const };
const TABLE = Int32Array.from({ length: KV.nBlocks }, (_, i) => i);
const CHUNK = 128;

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

/**
 * Prefills `p` on both runners, then decodes its 32 greedy steps on both. Every logit of
 * two ranks stays within the fixture's tolerance of one rank's: partial sums round a little
 * differently, and where activations are quantized to 8 bits before a product (Q8_0) such a
 * difference can tip one value to the next step, which moves logits by up to ~0.2.
 */
function checkPrompt(tp: ModelRunner, one: ModelRunner, p: GoldenPrompt, tol: number): void {
  let last: { tp: Float32Array; one: Float32Array } = {
    tp: new Float32Array(0),
    one: new Float32Array(0),
  };
  for (let start = 0; start < p.tokens.length; start += CHUNK) {
    const chunk = p.tokens.slice(start, start + CHUNK);
    const b = batch(chunk, start, [chunk.length - 1]);
    last = { tp: tp.forward(b), one: one.forward(b) };
  }
  const d = topDiff(last.tp, p.last_topk);
  assert(d <= tol, `${p.name}: top-20 logits differ from llama.cpp by ${d} > ${tol}`);
  const split = maxDiff(last.tp, last.one);
  assert(split <= tol, `${p.name}: two ranks and one differ by ${split}`);
  const greedy = [argmax(last.tp)];
  for (let k = 1; k < p.greedy.length; k++) {
    const b = batch([greedy[k - 1]], p.tokens.length + k - 1, [0]);
    const [a, o] = [tp.forward(b), one.forward(b)];
    const d = maxDiff(a, o);
    assert(d <= tol, `${p.name}: step ${k}: two ranks and one differ by ${d}`);
    greedy.push(argmax(a));
    const s = topDiff(a, p.greedy[k].top5);
    assert(s <= tol, `${p.name}: greedy step ${k} top-5 logits differ by ${s}`);
  }
  assertEquals(greedy, p.greedy.map((g) => g.id), `${p.name}: greedy continuation`);
}

function withRunners(
  name: ModelFixture,
  fn: (tp: TpRunner, one: LocalRunner) => void,
): void {
  withLogs(() => runners(name, fn));
}

function runners(
  name: ModelFixture,
  fn: (tp: TpRunner, one: LocalRunner) => void,
): void {
  const model = openModel(fixture(`${name}.gguf`));
  const tp = TpRunner.open(
    model,
    { device: "cpu", threads: 1, tensorParallel: 2, devices: DEVICES },
    KV,
  );
  const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, KV);
  try {
    assertEquals(workersOn(LABEL).length, 1, "one worker process for two ranks");
    fn(tp, one);
  } finally {
    tp.close();
    one.close();
    model.file.close();
  }
  assertEquals(workersOn(LABEL), [], "the worker is reaped on close");
}

for (const name of ["qwen3-tiny-q8_0", "qwen3-tiny-f16"] as const) {
  Deno.test(`tp runner: ${name} on two ranks matches llama.cpp and one rank, in lockstep`, () => {
    withRunners(name, (tp, one) => {
      const prompts = modelGolden(name).prompts;
      for (const p of prompts) checkPrompt(tp, one, p, LOGIT_TOLERANCE[name]);
      const steps = prompts.reduce((n, p) => n + Math.ceil(p.tokens.length / CHUNK) + 31, 0);
      assertEquals(tp.steps, steps, "every step ran on every rank (workers count theirs too)");
      assertEquals(tp.failure, null);
    });
  });
}

Deno.test("tp runner: a step of several sequences over paged blocks equals one rank's", () => {
  // F16 weights: activations stay f32, so two ranks agree with one to rounding.
  withRunners("qwen3-tiny-f16", (tp, one) => {
    const a = [9707, 11, 1879, 0, 553, 264];
    const b = [3838, 374, 279, 6722];
    // Sequence A in blocks 7, 3; sequence B in block 12: prefills in one step, then both decode.
    const tables = [Int32Array.of(7, 3), Int32Array.of(12)];
    const step = (rows: Array<{ seq: number; ids: number[]; start: number }>): Step => {
      const ids: number[] = [];
      const positions: number[] = [];
      const sequences: StepLayout["sequences"] = [];
      const logitRows: number[] = [];
      for (const r of rows) {
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
    const steps = [
      step([{ seq: 0, ids: a, start: 0 }, { seq: 1, ids: b, start: 0 }]),
      step([{ seq: 0, ids: [42], start: a.length }, { seq: 1, ids: [7], start: b.length }]),
      step([{ seq: 1, ids: [8, 9, 10], start: b.length + 1 }, { seq: 0, ids: [43], start: 7 }]),
    ];
    for (const s of steps) {
      const [x, y] = [tp.forward(s), one.forward(s)];
      assertEquals(x.length, s.logitRows.length * tp.shape.vocabSize);
      const d = maxDiff(x, y);
      assert(d < 1e-3, `batched step: two ranks and one differ by ${d}`);
    }
  });
});

Deno.test("tp runner: a step asking final hidden states gets the leader's, equal to one rank's", () => {
  // What embeddings are pooled from: every rank runs the layers, the leader the output norm.
  withRunners("qwen3-tiny-f16", (tp, one) => {
    const ids = [9707, 11, 1879, 0, 553, 264, 3838, 374];
    const s: Step = { ...batch(ids, 0, [0, 3, 7]), output: "hidden" };
    const [x, y] = [tp.forward(s), one.forward(s)];
    assertEquals(x.length, 3 * tp.shape.embeddingLength);
    const d = maxDiff(x, y);
    assert(d < 1e-3, `hidden states: two ranks and one differ by ${d}`);
    // The next logits step is whole again: its template is not the hidden one's.
    const logits = tp.forward(batch([42], ids.length, [0]));
    assertEquals(logits.length, tp.shape.vocabSize);
  });
});

Deno.test("tp runner: splits the model cannot take are refused before any process starts", () => {
  const cases: Array<[string, number, RegExp]> = [
    [
      "qwen3-small-q4_k_m.gguf",
      2,
      /cannot split blk\.0\.attn_output\.weight \(Q4_K\) over 2 ranks: 128 of its 256 input columns per rank is not a whole number of Q4_K blocks \(256 values each\)/,
    ],
    ["qwen3-tiny-q8_0.gguf", 3, /its 4 attention heads do not divide by 3/],
    ["qwen3-tiny-q8_0.gguf", 4, /its 2 KV heads do not divide by 4/],
  ];
  for (const [name, n, message] of cases) {
    const model = openModel(fixture(name));
    try {
      const err = assertThrows(
        () =>
          TpRunner.open(model, {
            device: "cpu",
            threads: 1,
            tensorParallel: n,
            devices: [0, 1, 2, 3].slice(0, n),
          }, KV),
        ShardError,
      );
      assertEquals(err.code, "unshardable");
      assertMatch(err.message, message);
      assertEquals([1, 2, 3].flatMap(workersOn), []);
    } finally {
      model.file.close();
    }
  }
});

/** A one-rank tensor-parallel runner and a plain one on the same model, and a prompt. */
function oneRankAndPlain(
  fn: (tp: TpRunner, one: LocalRunner, prompt: number[]) => void,
): void {
  const model = openModel(fixture("qwen3-tiny-q4_0.gguf"));
  const tp = withLogs(() =>
    TpRunner.open(model, { device: "cpu", threads: 1, tensorParallel: 1 }, KV)
  );
  const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, KV);
  try {
    fn(tp, one, modelGolden("qwen3-tiny-q4_0").prompts.find((q) => q.name === "text_fox")!.tokens);
  } finally {
    tp.close();
    one.close();
    model.file.close();
  }
}

Deno.test("tp runner: one rank through the same code is exactly the unsplit model", () => {
  oneRankAndPlain((tp, one, tokens) => {
    const b = batch(tokens, 0, [tokens.length - 1]);
    assertEquals(tp.forward(b), one.forward(b));
    assertEquals(workersOn(LABEL), []);
  });
});

Deno.test("tp runner: greedy picks under token masks are one rank's native masked picks", () => {
  oneRankAndPlain((tp, one, tokens) => {
    const b = batch(tokens, 0, [tokens.length - 2, tokens.length - 1]);
    const free = one.forwardArgmax(b)!;
    // Every third token, the free picks excluded: the masked picks must differ.
    const bits = new Uint32Array(Math.ceil(tp.shape.vocabSize / 32));
    for (let i = 0; i < tp.shape.vocabSize; i += 3) bits[i >>> 5] |= 1 << (i & 31);
    for (const id of free) bits[id >>> 5] &= ~(1 << (id & 31));
    const masks = [bits, null];
    const picks = tp.forwardArgmax(b, undefined, masks);
    assertEquals(picks, one.forwardArgmax(b, undefined, masks)!);
    assert(picks[0] % 3 === 0 && picks[0] !== free[0], `${picks[0]} under the mask`);
    assertEquals(picks[1], free[1]);
  });
});

Deno.test("tp runner: a killed worker breaks the group with a clear error; close reaps it", () =>
  withLogs(async (lines) => {
    const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
    const tp = TpRunner.open(model, {
      device: "cpu",
      threads: 1,
      tensorParallel: 2,
      devices: DEVICES,
    }, KV);
    try {
      tp.forward(batch([9707, 11], 0, [1]));
      const [worker] = workersOn(LABEL);
      Deno.kill(worker.pid, "SIGKILL");
      await until(() => workersOn(LABEL).length === 0, 5000, "the worker to die");
      const started = performance.now();
      const err = assertThrows(() => tp.forward(batch([1879], 2, [0])), TpError);
      assert(performance.now() - started < 3000, "noticed at once, not at the deadline");
      assertEquals(err.code, "tp_worker_failed");
      assertMatch(err.message, new RegExp(`rank 1 \\(pid ${worker.pid}\\) was killed by SIGKILL`));
      assertEquals(assertThrows(() => tp.forward(batch([1], 3, [0])), TpError), err);
      assertEquals(tp.failure, err);
      assertEquals(logged(lines, "tensor-parallel group broken").map((r) => r.error), [
        err.message,
      ]);
    } finally {
      tp.close();
      model.file.close();
    }
    assertEquals(workersOn(LABEL), []);
  }));

Deno.test("tp runner: a stuck worker misses the step deadline: aborted, killed, reported", () =>
  withLogs(async (lines) => {
    const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
    const tp = TpRunner.open(
      model,
      { device: "cpu", threads: 1, tensorParallel: 2, stepDeadlineMs: 400, devices: DEVICES },
      KV,
    );
    try {
      tp.forward(batch([9707, 11], 0, [1]));
      const [worker] = workersOn(LABEL);
      Deno.kill(worker.pid, "SIGSTOP");
      const started = performance.now();
      const err = assertThrows(() => tp.forward(batch([1879], 2, [0])), TpError);
      const ms = performance.now() - started;
      assertEquals(err.code, "tp_worker_failed");
      assertMatch(
        err.message,
        /a tensor-parallel step took longer than 0\.4 s: the group was aborted/,
      );
      assert(ms >= 350 && ms < 6000, `gave up after ${ms} ms`);
      await until(() => workersOn(LABEL).length === 0, 5000, "the stuck worker to be killed");
      assertMatch(
        String(logged(lines, "tensor-parallel worker failed")[0]?.error),
        new RegExp(`rank 1 \\(pid ${worker.pid}\\) missed the step deadline and was killed`),
      );
    } finally {
      tp.close();
      model.file.close();
    }
  }));

Deno.test("tp runner: a leader thread torn down without closing takes its workers with it", async () => {
  const thread = new Worker(new URL("./support/runner_thread.ts", import.meta.url), {
    type: "module",
  });
  try {
    const ready = new Promise((resolve, reject) => {
      thread.onmessage = (e) => resolve(e.data);
      thread.onerror = (e) => reject(new Error(e.message));
    });
    thread.postMessage({ path: fixture("qwen3-tiny-q8_0.gguf"), devices: [0, THREAD_LABEL] });
    assertEquals(await ready, "ready");
    assertEquals(workersOn(THREAD_LABEL).length, 1);
  } finally {
    thread.terminate();
  }
  await until(() => workersOn(THREAD_LABEL).length === 0, 10_000, "the orphaned worker to die");
});
