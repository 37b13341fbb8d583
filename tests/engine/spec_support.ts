/**
 * The engine core alone on a model file, for the speculative decoding tests: requests run
 * to their end, one at a time or several in one engine, with the engine's counters.
 */

import {
  Engine,
  type EngineRequest,
  type EngineStats,
  GREEDY,
  type SampledToken,
} from "../../src/engine/mod.ts";
import type { SpeculativeParams } from "../../src/engine/spec/speculation.ts";
import { openModel, openRunner, type RunnerOptions } from "../../src/runner/mod.ts";

/** Speculation that always drafts its `k` (no backing off), so that drafts really happen. */
export const FORCED: SpeculativeParams = { mode: "ngram", k: 4, n: 5, adaptive: false };
export const OFF: SpeculativeParams = { mode: "off", k: 0, n: 5 };

export interface Outcome {
  tokens: SampledToken[];
  finish: string;
}

/** An engine over the model at `path` (on the CPU unless `runner` says), closed after `fn`. */
export function withEngine<T>(
  path: string,
  fn: (engine: Engine) => T,
  runner: RunnerOptions = { device: "cpu", threads: 1 },
): T {
  const model = openModel(path);
  const kv = { blockSize: 16, nBlocks: 256, dtype: "f16" as const };
  const run = openRunner(model, runner, kv);
  const engine = new Engine(run, {
    contextLength: 2048,
    maxSequences: 4,
    maxBatchTokens: 64,
    kv,
  });
  try {
    return fn(engine);
  } finally {
    engine.cancelAll();
    run.close();
    model.file.close();
  }
}

/** A greedy request of `maxTokens` tokens that ignores end-of-generation tokens. */
export function request(
  id: string,
  prompt: number[],
  maxTokens: number,
  speculative: SpeculativeParams,
  over: Partial<EngineRequest> = {},
): EngineRequest {
  return { id, prompt, maxTokens, sampling: GREEDY, stopTokenIds: [], speculative, ...over };
}

/** Queues `req`; the outcome fills in as the engine steps. */
export function submit(engine: Engine, req: EngineRequest): Outcome {
  const out: Outcome = { tokens: [], finish: "" };
  engine.submit(req, {
    token: (t) => (out.tokens.push(t), false),
    finished: (reason) => (out.finish = reason),
    failed: (code) => (out.finish = `error:${code}`),
  });
  return out;
}

/** Runs `req` alone to its end; returns its outcome and what the engine counted meanwhile. */
export function generate(engine: Engine, req: EngineRequest): Outcome & { stats: EngineStats } {
  const before = engine.stats();
  const out = submit(engine, req);
  while (engine.hasWork) engine.step();
  return { ...out, stats: delta(engine.stats(), before) };
}

/** The counters of `after` less those of `before`. */
export function delta(after: EngineStats, before: EngineStats): EngineStats {
  const out = { ...after };
  for (const key of Object.keys(out) as Array<keyof EngineStats>) {
    out[key] = after[key] - before[key];
  }
  return out;
}

/** Token ids of an outcome. */
export function ids(out: Outcome): number[] {
  return out.tokens.map((t) => t.id);
}

/**
 * Prompts over `base` whose continuation the fixtures' models copy from the prompt: the
 * fixtures give every token a designed successor, so after `base` they continue with its
 * greedy continuation `chain` wherever it sits in the context. `copy` holds the chain
 * whole (drafts are accepted); `noisy` has every fifth token of it replaced (drafts are
 * accepted in part and rejected, again and again).
 */
export function workloads(
  base: number[],
  chain: number[],
): { copy: number[]; noisy: number[] } {
  const noisy = chain.map((t, i) => (i % 5 === 4 ? base[(i * 7) % base.length] : t));
  return { copy: [...base, ...chain, ...base], noisy: [...base, ...noisy, ...base] };
}
