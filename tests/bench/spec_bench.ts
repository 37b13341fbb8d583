/**
 * Speculative decoding, single stream: decode tokens per second with and without it, side
 * by side in one run, on a Qwen3-0.6B-shaped Q8_0 model whose greedy continuation is
 * designed (copying_model.ts). Prompt lookup over three workloads:
 *
 * - copy: a 1,500-token "source file" (a stretch of the model's chain, one token in 50
 *   edited) between an instruction's tokens, ending where the source starts: the model
 *   rewrites the source, and drafts are rejected at the edits;
 * - low overlap: 1,500 random tokens; the continuation repeats nothing (drafts are rare);
 * - false matches: random tokens strewn with 3-token fragments of the continuation, each
 *   followed by a wrong token: nearly every step finds a draft that fails, so only the
 *   backing off keeps speculation from costing.
 *
 * Then a draft model (a small copying model that agrees with the target's continuation on
 * a known share of tokens, 100% down to 20%): speedup against acceptance, and the share
 * where it breaks even.
 *
 *   deno task bench:spec [--tokens N] [--threads T] [--reps R] [--k K] [--draft-k K]
 *
 * Needs a quiet machine for numbers worth comparing.
 */

import { parseArgs } from "node:util";
import { Engine, type EngineStats, GREEDY } from "../../src/engine/mod.ts";
import type { SpeculativeParams } from "../../src/engine/mod.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { type ModelRunner, openModel, openRunner } from "../../src/runner/mod.ts";
import type { KvPoolSpec } from "../../src/backend/backend.ts";
import { copyingDraft, copyingModel } from "./copying_model.ts";

const PROMPT = 1500;
const EDIT_EVERY = 50;

interface Measured {
  tokPerSec: number;
  ids: number[];
  stats: EngineStats;
  stepMs: number;
}

function chain(successor: Int32Array, start: number, length: number): number[] {
  const out = [start];
  while (out.length < length) out.push(successor[out.at(-1)!]);
  return out;
}

function workloads(successor: Int32Array, rng: Rng): Array<[string, number[]]> {
  const vocab = successor.length;
  const random = (n: number): number[] => Array.from({ length: n }, () => rng.u32() % vocab);
  const source = chain(successor, rng.u32() % vocab, PROMPT);
  const edited = source.map((t, i) => (i % EDIT_EVERY === EDIT_EVERY - 1 ? rng.u32() % vocab : t));
  const copy = [...random(16), ...edited, ...random(16), source[0]];

  const low = random(PROMPT);

  const last = rng.u32() % vocab;
  const ahead = chain(successor, last, 600);
  const strewn = random(PROMPT);
  for (let i = 1, at = 0; at + 4 < strewn.length && i + 3 < ahead.length; i += 2, at += 7) {
    strewn.splice(at, 4, ahead[i], ahead[i + 1], ahead[i + 2], rng.u32() % vocab);
  }
  return [["copy", copy], ["low overlap", low], ["false matches", [...strewn, last]]];
}

function decode(
  engine: Engine,
  prompt: number[],
  tokens: number,
  speculative: Partial<SpeculativeParams>,
): Measured {
  const times: number[] = [];
  const ids: number[] = [];
  engine.submit(
    { id: "b", prompt, maxTokens: tokens, sampling: GREEDY, stopTokenIds: [], speculative },
    {
      token: (t) => (ids.push(t.id), times.push(performance.now()), false),
      finished: () => {},
      failed: (code, message) => {
        throw new Error(`${code}: ${message}`);
      },
    },
  );
  while (ids.length === 0) engine.step();
  const before = engine.stats();
  while (engine.hasWork) engine.step();
  const after = engine.stats();
  const stats = { ...after };
  for (const key of Object.keys(stats) as Array<keyof EngineStats>) {
    stats[key] = after[key] - before[key];
  }
  const seconds = (times.at(-1)! - times[0]) / 1000;
  return {
    tokPerSec: (ids.length - 1) / seconds,
    ids,
    stats,
    stepMs: (seconds * 1000) / stats.steps,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const HEADER = "plain tok/s  spec tok/s  speedup  accepted  tok/verif  ms/step plain  ms/verif";

/** Plain and speculative decoding of `prompt`, alternated `reps` times; one table row. */
function compare(
  engine: Engine,
  label: string,
  prompt: number[],
  o: { tokens: number; reps: number },
  speculative: Partial<SpeculativeParams>,
): number {
  const plain: Measured[] = [];
  const spec: Measured[] = [];
  for (let r = 0; r < o.reps; r++) {
    plain.push(decode(engine, prompt, o.tokens, { mode: "off" }));
    spec.push(decode(engine, prompt, o.tokens, speculative));
  }
  if (spec.some((s) => s.ids.join() !== plain[0].ids.join())) {
    throw new Error(`${label}: speculative output differs from plain decoding's`);
  }
  const p = median(plain.map((m) => m.tokPerSec));
  const s = median(spec.map((m) => m.tokPerSec));
  const st = spec[0].stats;
  const accepted = st.specDrafted === 0 ? 0 : st.specAccepted / st.specDrafted;
  const perVerif = st.specVerifications === 0 ? 0 : st.specTokens / st.specVerifications;
  const cells = [
    p.toFixed(1).padStart(11),
    s.toFixed(1).padStart(10),
    `${(s / p).toFixed(2).padStart(6)}x`,
    `${(100 * accepted).toFixed(0).padStart(7)}%`,
    perVerif.toFixed(2).padStart(9),
    median(plain.map((m) => m.stepMs)).toFixed(1).padStart(13),
    median(spec.map((m) => m.stepMs)).toFixed(1).padStart(8),
  ];
  console.log(`${label.padEnd(15)} ${cells.join("  ")}`);
  console.log(
    `  ${st.specVerifications} verifications of ${st.steps} steps, ` +
      `${st.specDrafted} drafted, ${st.specAccepted} accepted`,
  );
  return s / p;
}

function engineOver(runner: ModelRunner, kv: KvPoolSpec, draft?: ModelRunner): Engine {
  return new Engine(runner, {
    contextLength: 4096,
    maxSequences: 1,
    maxBatchTokens: 512,
    // The prompt in whole 512-token steps: nobody else waits on it here.
    stepTargetMs: Infinity,
    kv,
    ...(draft ? { draft: { runner: draft, kv } } : {}),
  });
}

/** Acceptance where the speedup crosses 1, interpolated; null if it never does. */
function breakEven(points: Array<[agree: number, speedup: number]>): number | null {
  for (let i = 1; i < points.length; i++) {
    const [a0, s0] = points[i - 1], [a1, s1] = points[i];
    if ((s0 - 1) * (s1 - 1) <= 0 && s0 !== s1) return a0 + ((1 - s0) * (a1 - a0)) / (s1 - s0);
  }
  return null;
}

function main(): void {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      tokens: { type: "string", default: "128" },
      threads: { type: "string", default: "0" },
      reps: { type: "string", default: "3" },
      k: { type: "string", default: "6" },
      "draft-k": { type: "string", default: "4" },
    },
  });
  const o = { tokens: Number(values.tokens), reps: Number(values.reps) };
  const threads = Number(values.threads);
  const k = Number(values.k);
  const draftK = Number(values["draft-k"]);
  const { path, successor } = copyingModel();
  const model = openModel(path);
  const kv = { blockSize: 16, nBlocks: 256, dtype: "f16" as const };
  const runner = openRunner(model, { device: "cpu", threads }, kv);
  console.log(`Qwen3-0.6B-shaped Q8_0 (copying), ${runner.device}, threads ${threads || "all"}`);
  console.log(`single stream, ${o.tokens} tokens decoded, median of ${o.reps}`);
  try {
    console.log(`\nprompt lookup (k up to ${k}, n 5..3), ${PROMPT}-token prompts`);
    console.log(`workload        ${HEADER}`);
    for (const [name, prompt] of workloads(successor, new Rng(7))) {
      // One engine per workload: the prompt's blocks stay cached, so only decoding differs.
      compare(engineOver(runner, kv), name, prompt, o, { mode: "ngram", k, n: 5 });
    }
    console.log(
      `\ndraft model (hidden 256, 2 layers; k ${draftK} fixed), agreeing with the model on a ` +
        "share of tokens; 256-token random prompts",
    );
    console.log(`agreement       ${HEADER}`);
    const prompt = Array.from({ length: 256 }, (_, i) => successor[i * 577]);
    const points: Array<[number, number]> = [];
    for (const agree of [1, 0.8, 0.6, 0.4, 0.2]) {
      const draftModel = openModel(copyingDraft(agree).path);
      const draft = openRunner(draftModel, { device: "cpu", threads }, kv);
      try {
        const speedup = compare(engineOver(runner, kv, draft), `${agree * 100}%`, prompt, o, {
          mode: "draft",
          k: draftK,
          adaptive: false,
        });
        points.push([agree, speedup]);
      } finally {
        draft.close();
        draftModel.file.close();
      }
    }
    const even = breakEven(points);
    console.log(
      even === null
        ? "break-even: not crossed in this range"
        : `break-even: the draft must agree on about ${(100 * even).toFixed(0)}% of tokens`,
    );
  } finally {
    runner.close();
    model.file.close();
  }
}

main();
