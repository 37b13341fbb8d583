/**
 * `neuron bench`'s pp and tg tests at each depth, for one KV cache type or several side by
 * side (llama-bench's `-ctk f16,q8_0`). With several, each repetition runs every type in
 * turn rather than one type's repetitions after the other's: this host's memory speed
 * drifts by 2x within minutes, and a ratio between cache types (q8_0 KV against f16 at 8k)
 * is only worth something if both saw the same moments.
 */

import type { KvDType } from "../backend/backend.ts";
import { mean, type Measurement, type ModelBench } from "./runner.ts";

/** One test's samples at a depth on one cache type. */
export interface DepthMeasurement extends Measurement {
  depth: number;
  kvType: KvDType;
}

/** The tests to run: prompt and generation lengths at each depth, `reps` times each. */
export interface DepthPlan {
  depths: number[];
  prompts: number[];
  gens: number[];
  reps: number;
}

/**
 * Runs `fn` on each bench once to warm up, then `reps` rounds of one run per bench;
 * returns each bench's tokens/s per repetition. `afterEach` follows every run.
 */
function measureSideBySide(
  benches: readonly ModelBench[],
  test: string,
  n: number,
  reps: number,
  fn: (bench: ModelBench, n: number, seed: number) => number,
  afterEach?: () => void,
): Measurement[] {
  for (const b of benches) fn(b, Math.min(n, 16), 0);
  const samples = benches.map(() => [] as number[]);
  for (let r = 0; r < reps; r++) {
    benches.forEach((b, i) => {
      samples[i].push(n / fn(b, n, r + 1));
      afterEach?.();
    });
  }
  return samples.map((s) => ({ test, samples: s }));
}

/**
 * Every test of `plan` on every bench (one per cache type), in the plan's order;
 * `afterFirstTg` follows each run of each depth's first tg test (the bandwidth samples).
 */
export function runDepths(
  benches: readonly ModelBench[],
  plan: DepthPlan,
  afterFirstTg?: () => void,
): DepthMeasurement[] {
  const results: DepthMeasurement[] = [];
  const keep = (depth: number, ms: Measurement[]) =>
    ms.forEach((m, i) => results.push({ ...m, depth, kvType: benches[i].kvType }));
  for (const depth of plan.depths) {
    for (const n of plan.prompts) {
      keep(
        depth,
        measureSideBySide(benches, `pp${n}`, n, plan.reps, (b, k, s) => b.prompt(k, s, depth)),
      );
    }
    plan.gens.forEach((n, i) => {
      const ms = measureSideBySide(
        benches,
        `tg${n}`,
        n,
        plan.reps,
        (b, k, s) => b.generate(k, s, depth),
        i === 0 ? afterFirstTg : undefined,
      );
      keep(depth, ms);
    });
  }
  return results;
}

/** A cache type's tokens/s against the first type's, on the same test at the same depth. */
export interface KvRatio {
  depth: number;
  test: string;
  kvType: KvDType;
  baseline: KvDType;
  ratio: number;
}

/** Each later cache type's mean tokens/s over the first type's, test by test. */
export function kvRatios(
  results: readonly DepthMeasurement[],
  kvTypes: readonly KvDType[],
): KvRatio[] {
  const ratios: KvRatio[] = [];
  const baseline = kvTypes[0];
  for (const base of results.filter((m) => m.kvType === baseline)) {
    for (const kvType of kvTypes.slice(1)) {
      const other = results.find((m) =>
        m.kvType === kvType && m.depth === base.depth && m.test === base.test
      )!;
      ratios.push({
        depth: base.depth,
        test: base.test,
        kvType,
        baseline,
        ratio: mean(other.samples) / mean(base.samples),
      });
    }
  }
  return ratios;
}
