/**
 * Speculative decoding (prompt lookup), single stream: decode tokens per second with and
 * without it, side by side in one run, on a Qwen3-0.6B-shaped Q8_0 model whose greedy
 * continuation is designed (copying_model.ts), over three workloads:
 *
 * - copy: a 1,500-token "source file" (a stretch of the model's chain, one token in 50
 *   edited) between an instruction's tokens, ending where the source starts: the model
 *   rewrites the source, and drafts are rejected at the edits;
 * - low overlap: 1,500 random tokens; the continuation repeats nothing (drafts are rare);
 * - false matches: random tokens strewn with 3-token fragments of the continuation, each
 *   followed by a wrong token: nearly every step finds a draft that fails, so only the
 *   backing off keeps speculation from costing.
 *
 *   deno task bench:spec [--tokens N] [--threads T] [--reps R] [--k K]
 *
 * Needs a quiet machine for numbers worth comparing.
 */

import { parseArgs } from "node:util";
import { Engine, type EngineStats, GREEDY } from "../../src/engine/mod.ts";
import type { SpeculativeParams } from "../../src/engine/mod.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { openModel, openRunner } from "../../src/runner/mod.ts";
import { copyingModel } from "./copying_model.ts";

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

function main(): void {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      tokens: { type: "string", default: "128" },
      threads: { type: "string", default: "0" },
      reps: { type: "string", default: "3" },
      k: { type: "string", default: "6" },
    },
  });
  const tokens = Number(values.tokens);
  const threads = Number(values.threads);
  const reps = Number(values.reps);
  const k = Number(values.k);
  const { path, successor } = copyingModel();
  const model = openModel(path);
  const kv = { blockSize: 16, nBlocks: 256, dtype: "f16" as const };
  const runner = openRunner(model, { device: "cpu", threads }, kv);
  console.log(`Qwen3-0.6B-shaped Q8_0 (copying), ${runner.device}, threads ${threads || "all"}`);
  console.log(
    `single stream, ${PROMPT}-token prompts, ${tokens} tokens decoded, median of ${reps}`,
  );
  console.log(
    "workload        plain tok/s  ngram tok/s  speedup  accepted  tok/verif  ms/step plain  ms/verif",
  );
  try {
    for (const [name, prompt] of workloads(successor, new Rng(7))) {
      // One engine per workload: the prompt's blocks stay cached, so only decoding differs.
      const engine = new Engine(runner, {
        contextLength: 4096,
        maxSequences: 1,
        maxBatchTokens: 512,
        // The prompt in whole 512-token steps: nobody else waits on it here.
        stepTargetMs: Infinity,
        kv,
      });
      const plain: Measured[] = [];
      const spec: Measured[] = [];
      for (let r = 0; r < reps; r++) {
        plain.push(decode(engine, prompt, tokens, { mode: "off" }));
        spec.push(decode(engine, prompt, tokens, { mode: "ngram", k, n: 5 }));
      }
      if (spec.some((s) => s.ids.join() !== plain[0].ids.join())) {
        throw new Error(`${name}: speculative output differs from plain decoding's`);
      }
      const p = median(plain.map((m) => m.tokPerSec));
      const s = median(spec.map((m) => m.tokPerSec));
      const st = spec[0].stats;
      const accepted = st.specDrafted === 0 ? 0 : st.specAccepted / st.specDrafted;
      const perVerif = st.specVerifications === 0 ? 0 : st.specTokens / st.specVerifications;
      const verifMs = median(spec.map((m) => m.stepMs));
      console.log(
        `${name.padEnd(15)} ${p.toFixed(1).padStart(11)}  ${s.toFixed(1).padStart(11)}  ` +
          `${(s / p).toFixed(2).padStart(6)}x  ${(100 * accepted).toFixed(0).padStart(7)}%  ` +
          `${perVerif.toFixed(2).padStart(9)}  ${
            median(plain.map((m) => m.stepMs)).toFixed(1)
              .padStart(13)
          }  ${verifMs.toFixed(1).padStart(8)}`,
      );
      console.log(
        `  ngram: ${st.specVerifications} verifications of ${st.steps} steps, ` +
          `${st.specDrafted} drafted, ${st.specAccepted} accepted`,
      );
    }
  } finally {
    runner.close();
    model.file.close();
  }
}

main();
