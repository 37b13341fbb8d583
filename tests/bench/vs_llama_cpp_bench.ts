/**
 * neuron beside llama.cpp on the same synthetic files, measured in one run: pp N (an N-token
 * prompt in one batch) and tg N (N tokens one at a time), repetitions interleaved so that a
 * machine that slows down slows both. llama.cpp runs in this process through the live
 * reference (tests/support/llama_ref.ts) with its own spinning threadpool, as llama-bench
 * runs it; both use 2 threads.
 *
 *   deno task bench:families [shape ...] [--quant q4_k_m] [-p 512] [-n 128] [-r 3]
 *                            [--repack 0] [--apart]
 *
 * For a model that fits in memory once but not twice (qwen3-30b-a3b on 24 GiB): `--repack 0`
 * keeps neuron's weights in the mapped file, and `--apart` runs all of neuron's repetitions
 * and closes it before llama.cpp loads (its own CPU repacking copies the weights), instead
 * of interleaving them; the file stays in the page cache between the two.
 */

import { parseArgs } from "node:util";
import { type LlamaModel, openLlamaModel } from "../support/llama_ref.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { median, ModelBench } from "../../src/bench/runner.ts";
import { isFileType, isSyntheticShape, syntheticModel } from "../../src/bench/synthetic.ts";
import { openModel } from "../../src/runner/mod.ts";
import { benchPrompt } from "./prompt.ts";

const { values, positionals } = parseArgs({
  args: Deno.args,
  options: {
    quant: { type: "string", default: "q4_k_m" },
    p: { type: "string", short: "p", default: "512" },
    n: { type: "string", short: "n", default: "128" },
    r: { type: "string", short: "r", default: "3" },
    repack: { type: "string", default: "1" },
    apart: { type: "boolean", default: false },
  },
  allowPositionals: true,
});
const shapes = positionals.length > 0
  ? positionals
  : ["qwen3-0.6b", "llama3-1b", "qwen2.5-0.5b", "gemma3-1b"];
const quant = values.quant!;
const [pp, tg, reps, apart] = [Number(values.p), Number(values.n), Number(values.r), values.apart];
if (!isFileType(quant) || shapes.some((s) => !isSyntheticShape(s))) {
  console.error(
    `usage: bench:families [shape ...] [--quant q] [--repack 0|1] [--apart] (neuron bench's shapes, quants)`,
  );
  Deno.exit(2);
}

function seconds(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
}

console.log(`| model | test | neuron tok/s | llama.cpp tok/s | ratio |`);
console.log(`|---|---|---|---|---|`);
for (const shape of shapes) {
  if (!isSyntheticShape(shape)) continue;
  const path = syntheticModel(shape, quant);
  const model = openModel(path);
  const vocab = model.shape.vocabSize;
  const rates: Record<string, number[]> = { ppOurs: [], ppRef: [], tgOurs: [], tgRef: [] };
  const backend = new CpuBackend({ threads: 2, repack: values.repack !== "0" });
  const ours = ModelBench.load(model, backend, pp + tg + 16);
  const closeOurs = () => {
    ours.close();
    backend.close();
    model.file.close();
  };
  const timeOurs = (r: number) => {
    rates.ppOurs.push(pp / ours.prompt(pp, r));
    rates.tgOurs.push(tg / ours.generate(tg, r));
  };
  const timeRef = (ref: LlamaModel, r: number) => {
    const ids = benchPrompt(pp, vocab, r);
    rates.ppRef.push(pp / seconds(() => ref.logits(ids)));
    // greedy(1 token, n) decodes the prompt token, then n - 1 more: n single-token steps.
    rates.tgRef.push(tg / seconds(() => ref.greedy(benchPrompt(1, vocab, r), tg)));
  };
  ours.prompt(16, 0);
  if (apart) {
    for (let r = 1; r <= reps; r++) timeOurs(r);
    closeOurs();
  }
  {
    using ref = await openLlamaModel(path, {
      contextLength: pp + tg + 16,
      threads: 2,
      spin: true,
    });
    ref.logits(benchPrompt(16, vocab, 0));
    for (let r = 1; r <= reps; r++) {
      if (!apart) timeOurs(r);
      timeRef(ref, r);
    }
  }
  if (!apart) closeOurs();
  const row = (test: string, a: number[], b: number[]) =>
    console.log(
      `| ${shape} ${quant} | ${test} | ${median(a).toFixed(2)} | ${median(b).toFixed(2)} | ` +
        `${(median(a) / median(b)).toFixed(2)}x |`,
    );
  row(`pp${pp}`, rates.ppOurs, rates.ppRef);
  row(`tg${tg}`, rates.tgOurs, rates.tgRef);
}
