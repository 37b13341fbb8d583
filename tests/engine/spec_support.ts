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
import {
  type ModelRunner,
  openModel,
  openRunner,
  type RunnerOptions,
} from "../../src/runner/mod.ts";

/** Speculation that always drafts its `k` (no backing off), so that drafts really happen. */
export const FORCED: SpeculativeParams = { mode: "ngram", k: 4, n: 5, adaptive: false };
export const OFF: SpeculativeParams = { mode: "off", k: 0, n: 5 };
/** A draft model's drafts, always `k` of them. */
export const DRAFT: SpeculativeParams = { mode: "draft", k: 4, n: 5, adaptive: false };

export interface Outcome {
  tokens: SampledToken[];
  finish: string;
}

export interface EngineSetup {
  /** Where the model runs (default: the CPU, one thread). */
  runner?: RunnerOptions;
  /** A draft model's file. */
  draft?: string;
  /** EngineOptions.stepTargetMs. */
  stepTargetMs?: number;
}

/** An engine over the model at `path`, set up as `setup` says, closed after `fn`. */
export function withEngine<T>(path: string, fn: (engine: Engine) => T, setup: EngineSetup = {}): T {
  const runner = setup.runner ?? { device: "cpu", threads: 1 };
  const draft = setup.draft;
  const kv = { blockSize: 16, nBlocks: 256, dtype: "f16" as const };
  const opened: Array<{ model: ReturnType<typeof openModel>; runner: ModelRunner }> = [];
  try {
    for (const p of draft ? [path, draft] : [path]) {
      const model = openModel(p);
      opened.push({ model, runner: openRunner(model, runner, kv) });
    }
    const engine = new Engine(opened[0].runner, {
      contextLength: 2048,
      maxSequences: 4,
      maxBatchTokens: 64,
      kv,
      stepTargetMs: setup.stepTargetMs,
      ...(draft ? { draft: { runner: opened[1].runner, kv } } : {}),
    });
    try {
      return fn(engine);
    } finally {
      engine.cancelAll();
    }
  } finally {
    for (const o of opened) {
      o.runner.close();
      o.model.file.close();
    }
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
