/**
 * llama.cpp's CUDA build on the same synthetic files as tests/gpu/bench.ts, in the same
 * device call, for the GPU rows' ratio against llama.cpp: pp N (an N-token prompt in one
 * batch, only the last position's logits) and tg N (N tokens one at a time, each one's
 * logits read back and the argmax taken on the host: the bench's "logits read back" row
 * does the same). Every layer offloaded, llama.cpp's defaults otherwise (flash attention
 * where it picks it). The library comes from $NEURON_LLAMA_CUDA_DIR (tests/gpu/prepare.sh
 * LLAMA=1 carries it; its PTX is JIT-compiled on first use, which the warm-up takes).
 *
 *   deno run -A tests/gpu/llama_bench.ts [--models 0.6b,8b] [-p 512] [-n 128] [-r 3]
 *                                        [--neuron bench.json] [--json FILE]
 *
 * With --neuron (the bench's JSON from the same call), one table of both and their ratio.
 */

import { parseArgs } from "node:util";
import { median } from "../../src/bench/runner.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { gpuModels } from "./models.ts";
import { benchPrompt } from "../bench/prompt.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    models: { type: "string", default: "0.6b,8b" },
    p: { type: "string", short: "p", default: "512" },
    n: { type: "string", short: "n", default: "128" },
    r: { type: "string", short: "r", default: "3" },
    neuron: { type: "string" },
    json: { type: "string" },
  },
});
const [pp, tg, reps] = [Number(values.p), Number(values.n), Number(values.r)];
if (![pp, tg, reps].every((v) => Number.isSafeInteger(v) && v > 0)) {
  throw new Error(`-p ${values.p} -n ${values.n} -r ${values.r}: positive integers`);
}

interface LlamaResult {
  model: string;
  pp: number;
  tg: number;
  warmSeconds: number;
}

const results: LlamaResult[] = [];
for (const m of gpuModels(values.models!)) {
  const path = m.path();
  using ref = await openLlamaModel(path, {
    contextLength: pp + tg + 16,
    threads: 4,
    gpuLayers: 999,
  });
  const t0 = performance.now();
  ref.atDepth([], benchPrompt(pp, ref.nVocab, 0), 4);
  const warmSeconds = (performance.now() - t0) / 1000;
  const ppRates: number[] = [], tgRates: number[] = [];
  for (let r = 1; r <= reps; r++) {
    const t = ref.atDepth([], benchPrompt(pp, ref.nVocab, r), tg);
    ppRates.push(pp / t.ppSeconds);
    tgRates.push(tg / t.tgSeconds);
  }
  const result = { model: m.label, pp: median(ppRates), tg: median(tgRates), warmSeconds };
  results.push(result);
  console.error(JSON.stringify(result));
  if (values.json) Deno.writeTextFileSync(values.json, JSON.stringify(results, null, 2));
}

interface NeuronRow {
  model: string;
  pp: number;
  tg: number;
  tgHostArgmax: number;
}

const neuron: NeuronRow[] = values.neuron ? JSON.parse(Deno.readTextFileSync(values.neuron)) : [];
console.log(`| model | test | neuron tok/s | llama.cpp tok/s | ratio |`);
console.log(`| --- | --- | ---: | ---: | ---: |`);
for (const l of results) {
  const n = neuron.find((r) => r.model === l.model);
  const row = (test: string, ours: number | undefined, theirs: number) => {
    const ratio = ours === undefined ? "" : `${(ours / theirs).toFixed(2)}x`;
    console.log(
      `| ${l.model} | ${test} | ${ours?.toFixed(0) ?? "-"} | ${theirs.toFixed(0)} | ${ratio} |`,
    );
  };
  row(`pp${pp}`, n?.pp, l.pp);
  row(`tg${tg}, logits read back`, n?.tgHostArgmax, l.tg);
}
