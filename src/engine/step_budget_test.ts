import { assert, assertEquals } from "../../tests/support/assert.ts";
import { runWork, StepBudget, type StepWork } from "./step_budget.ts";

/** A CPU-like machine: 20 ms a step, 2 ms a token, 1.8 µs a position attended. */
const cpuSeconds = (w: StepWork) => 0.020 + 0.002 * w.tokens + 1.8e-6 * w.attended;
const EMPTY: StepWork = { tokens: 0, attended: 0, read: 0 };

/** The largest chunk at `start` whose step, on top of `work`, takes at most `target` s. */
function largestFitting(work: StepWork, start: number, target: number): number {
  let n = 0;
  while (cpuSeconds(add(work, runWork(start, n + 1))) <= target) n++;
  return n;
}

function add(a: StepWork, b: StepWork): StepWork {
  return { tokens: a.tokens + b.tokens, attended: a.attended + b.attended, read: a.read + b.read };
}

/** Steps of a long prompt fed alone, then decode steps. */
function trained(): StepBudget {
  const b = new StepBudget(150, 4, 512);
  for (let start = 0; start < 4096; start += 200) {
    const n = 8 + (start % 48);
    b.observe(runWork(start, n), cpuSeconds(runWork(start, n)));
  }
  return b;
}

Deno.test("step budget: starts at 64 tokens, within the room left", () => {
  const b = new StepBudget(150, 4, 512);
  assertEquals(b.fit(EMPTY, 0, 1000), 64);
  assertEquals(b.fit(EMPTY, 0, 10), 10);
  assertEquals(b.fit({ tokens: 500, attended: 0, read: 0 }, 0, 1000), 12);
});

Deno.test("step budget: chunks take the target time at every depth of a long prompt", () => {
  const b = trained();
  for (const start of [0, 1000, 4000]) {
    const expected = largestFitting(EMPTY, start, 0.15);
    const got = b.fit(EMPTY, start, 100_000);
    assert(Math.abs(got - expected) <= 1, `start ${start}: ${got} tokens, expected ${expected}`);
  }
  // Deep in the prompt a token costs several times more than at its start.
  assert(b.fit(EMPTY, 4000, 100_000) * 3 < b.fit(EMPTY, 0, 100_000));
  // Decodes already in the step leave less room.
  const decodes = add(runWork(900, 1), runWork(2000, 1));
  assert(b.fit(decodes, 0, 100_000) < b.fit(EMPTY, 0, 100_000));
});

Deno.test("step budget: a run of decode steps keeps what prompt chunks taught", () => {
  const b = trained();
  const before = b.fit(EMPTY, 3000, 100_000);
  for (let i = 0; i < 500; i++) b.observe(runWork(100 + i, 1), cpuSeconds(runWork(100 + i, 1)));
  assertEquals(b.fit(EMPTY, 3000, 100_000), before);
});

Deno.test("step budget: never extrapolates past twice the largest step timed", () => {
  const b = new StepBudget(150, 4, 512);
  for (let i = 0; i < 20; i++) b.observe(runWork(i, 1), 0.02);
  assert(b.fit(EMPTY, 0, 1000) <= 64);
  const gpu = new StepBudget(150, 4, 512);
  gpu.observe(runWork(0, 100), 0.004);
  gpu.observe(runWork(100, 1), 0.002);
  assertEquals(gpu.fit(EMPTY, 0, 1000), 200);
  gpu.observe(runWork(0, 300), 0.010);
  assertEquals(gpu.fit(EMPTY, 0, 1000), 512);
});

Deno.test("step budget: noisy timings give costs none of which is negative", () => {
  const b = new StepBudget(150, 4, 512);
  let s = 7;
  const noise = () => ((s = (s * 48271) % 2147483647) / 2147483647 - 0.5) * 0.01;
  for (let i = 0; i < 64; i++) {
    const w = runWork((i * 97) % 3000, 1 + (i * 13) % 60);
    b.observe(w, Math.max(1e-4, cpuSeconds(w) + noise()));
  }
  for (const w of [EMPTY, runWork(0, 1), runWork(0, 64), runWork(3000, 16)]) {
    assert(b.predict(w) >= 0, `negative prediction for ${JSON.stringify(w)}`);
  }
  assert(Math.abs(b.predict(runWork(2000, 20)) - cpuSeconds(runWork(2000, 20))) < 0.01);
});

/** Deep in a long prompt on a CPU (a 0.6B model's shape, measured at 8k positions): 15 ms
 * a step, 0.6 ms a token, 4.5 µs a position read once per run, 1.2 µs a position attended. */
function deepSeconds(start: number, count: number): number {
  const w = runWork(start, count);
  return 0.015 + 0.0006 * w.tokens + 4.5e-6 * w.read + 1.2e-6 * w.attended;
}

/** Feeds a prompt of `length` tokens alone, as the scheduler does (at least one token a
 * step), chunked by `chunk`: each step's start and seconds. */
function feedAlone(
  length: number,
  chunk: (b: StepBudget, start: number) => number,
): Array<{ start: number; seconds: number }> {
  const b = new StepBudget(150, 16, 512);
  const steps = [];
  for (let start = 0; start < length;) {
    const n = Math.min(Math.max(1, chunk(b, start)), length - start);
    steps.push({ start, seconds: deepSeconds(start, n) });
    b.observe(runWork(start, n), deepSeconds(start, n));
    start += n;
  }
  return steps;
}

Deno.test("step budget: a 32k prompt alone is not cut into chunks that mostly re-read the cache", () => {
  const total = (steps: Array<{ seconds: number }>) => steps.reduce((a, s) => a + s.seconds, 0);
  const budgeted = feedAlone(32768, (b, start) => b.fit(EMPTY, start, 32768 - start));
  const whole = feedAlone(32768, () => 512);
  // One-token steps at 30k positions (the target alone) took 3.8x the 512-token chunks.
  assert(total(budgeted) < 1.4 * total(whole), `${total(budgeted)} s against ${total(whole)} s`);
  const slowest = Math.max(...budgeted.map((s) => s.seconds));
  assert(slowest <= 1.5, `a step of ${slowest} s`);
  // Where the target is affordable it is kept.
  const early = budgeted.filter((s) => s.start > 0 && s.start < 4000).map((s) => s.seconds);
  assert(Math.max(...early) < 0.2, `an early step of ${Math.max(...early)} s`);
});
