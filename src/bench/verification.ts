/**
 * What a speculative verification costs against a plain decode step (`neuron bench`): k + 1
 * rows in one step, every row's logits computed, against one row through the same path;
 * with a backend that times its ops (OpProfiler), where each step's time goes, op by op.
 */

import type { OpProfiler, OpTime } from "../backend/backend.ts";
import { mean, median, type ModelBench } from "./runner.ts";

export const VERIFY_K = 4;
export const VERIFY_REPS = 9;

export interface StepCost {
  verify_ms: number;
  step_ms: number;
  ratio: number;
}

/** One kind of op in the greedy steps: its calls and native ms per step, means. */
export interface OpCost {
  op: string;
  calls: number;
  step_ms: number;
  verify_ms: number;
}

/** The greedy steps op by op, and their wall time (means, so that the ops add up to it). */
export interface StepProfile {
  ops: OpCost[];
  step_wall_ms: number;
  verify_wall_ms: number;
}

export interface VerificationCost extends StepCost {
  depth: number;
  k: number;
  greedy: StepCost;
  /** With a profiler: the greedy steps' time by op (timing each op slows them ~0.3%). */
  profile?: StepProfile;
}

/** ms and calls per kind of op, summed over profiles. */
type OpSums = Map<string, { calls: number; ms: number }>;

function addProfile(sums: OpSums, times: OpTime[]): void {
  for (const t of times) {
    const s = sums.get(t.op) ?? { calls: 0, ms: 0 };
    s.calls += t.calls;
    s.ms += t.ms;
    sums.set(t.op, s);
  }
}

/** Step times in ms after a warm-up, VERIFY_REPS of each, a verification and a one-token
 * step alternated (so that a drifting machine slows both alike); `after` runs after each
 * step, the warm-up included. */
function alternate(
  bench: ModelBench,
  depth: number,
  greedy: boolean,
  after: (step: "warm-up" | "verify" | "step") => void = () => {},
): { verify: number[]; step: number[] } {
  bench.verify(VERIFY_K, 0, depth, greedy);
  after("warm-up");
  const verify: number[] = [], step: number[] = [];
  for (let r = 1; r <= VERIFY_REPS; r++) {
    verify.push(bench.verify(VERIFY_K, r, depth, greedy) * 1000);
    after("verify");
    step.push(bench.verify(0, r, depth, greedy) * 1000);
    after("step");
  }
  return { verify, step };
}

function stepCost(times: { verify: number[]; step: number[] }): StepCost {
  const [v, s] = [median(times.verify), median(times.step)];
  return { verify_ms: v, step_ms: s, ratio: v / s };
}

/**
 * A k = 4 verification step against a one-token step; medians. The top-level figures read
 * every row's logits back (sampled speculation); `greedy` takes each row's argmax where the
 * logits are. With `profiler`, the greedy steps are also timed op by op.
 */
export function verificationCost(
  bench: ModelBench,
  depth: number,
  profiler: OpProfiler | null = null,
): VerificationCost {
  const sampled = stepCost(alternate(bench, depth, false));
  if (profiler === null) {
    return { depth, k: VERIFY_K, ...sampled, greedy: stepCost(alternate(bench, depth, true)) };
  }
  const sums: { step: OpSums; verify: OpSums } = { step: new Map(), verify: new Map() };
  profiler.profileOps(true);
  let greedy: { verify: number[]; step: number[] };
  try {
    greedy = alternate(bench, depth, true, (step) => {
      const times = profiler.takeOpProfile();
      if (step !== "warm-up") addProfile(sums[step], times);
    });
  } finally {
    profiler.profileOps(false);
  }
  const ops = [...sums.step].map(([op, s]) => ({
    op,
    calls: s.calls / VERIFY_REPS,
    step_ms: s.ms / VERIFY_REPS,
    verify_ms: (sums.verify.get(op)?.ms ?? 0) / VERIFY_REPS,
  })).sort((a, b) => b.verify_ms - a.verify_ms);
  return {
    depth,
    k: VERIFY_K,
    ...sampled,
    greedy: stepCost(greedy),
    profile: { ops, step_wall_ms: mean(greedy.step), verify_wall_ms: mean(greedy.verify) },
  };
}

/** The verification's lines of `neuron bench`'s text report. */
export function printVerification(v: VerificationCost): void {
  const g = v.greedy;
  console.log(
    `depth ${v.depth}: a speculative verification of k = ${v.k} (${v.k + 1} rows, all with ` +
      `logits) takes ${v.ratio.toFixed(2)}x a one-token step ` +
      `(${v.verify_ms.toFixed(1)} vs ${v.step_ms.toFixed(1)} ms, median of ${VERIFY_REPS}) ` +
      `with the logits read back (sampling); ${g.ratio.toFixed(2)}x ` +
      `(${g.verify_ms.toFixed(1)} vs ${g.step_ms.toFixed(1)} ms) with each row's argmax ` +
      `taken where they are (greedy)`,
  );
  const p = v.profile;
  if (!p) return;
  console.log(`\nthe greedy steps op by op (ms a step, means of ${VERIFY_REPS}):`);
  console.log(`| op | calls | one-token step | k = ${v.k} verification | verification / step |`);
  console.log("| --- | ---: | ---: | ---: | ---: |");
  const row = (op: string, calls: string, step: number, verify: number) =>
    console.log(
      `| ${op} | ${calls} | ${step.toFixed(3)} | ${verify.toFixed(3)} | ` +
        `${(verify / step).toFixed(2)}x |`,
    );
  for (const o of p.ops) row(o.op, `${o.calls}`, o.step_ms, o.verify_ms);
  const sum = (key: "step_ms" | "verify_ms") => p.ops.reduce((a, o) => a + o[key], 0);
  const calls = p.ops.reduce((a, o) => a + o.calls, 0);
  row("all ops", `${calls}`, sum("step_ms"), sum("verify_ms"));
  row("the step (wall)", "", p.step_wall_ms, p.verify_wall_ms);
}
