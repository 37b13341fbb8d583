/**
 * Decode and prefill at depth (positions already in the KV cache), neuron beside llama.cpp
 * on the same synthetic file in one run, as llama-bench -d measures them: pp N after the
 * depth in one batch, tg N one token at a time after it. neuron runs with each --kv-type,
 * llama.cpp with f16 (and, for each quantized type, the same type with its Hadamard
 * rotation on, its default). Each depth's tg is also put against the memory bound: the
 * bandwidth probe's GB/s over the bytes a token reads (weights and the K/V at that depth).
 *
 *   deno task bench:depth [shape] [--quant q4_k_m] [-d 0,2048,8192] [-p 512] [-n 32] [-r 2]
 *                         [--kv-type f16,q8_0]
 */

import { parseArgs } from "node:util";
import { openLlamaModel } from "../support/llama_ref.ts";
import { bandwidthProbeOf, type KvDType } from "../../src/backend/backend.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { median, ModelBench } from "../../src/bench/runner.ts";
import { isFileType, isSyntheticShape, syntheticModel } from "../../src/bench/synthetic.ts";
import { openModel } from "../../src/runner/mod.ts";
import { benchPrompt } from "./prompt.ts";

const { values, positionals } = parseArgs({
  args: Deno.args,
  options: {
    quant: { type: "string", default: "q4_k_m" },
    d: { type: "string", short: "d", default: "0,2048,8192" },
    p: { type: "string", short: "p", default: "512" },
    n: { type: "string", short: "n", default: "32" },
    r: { type: "string", short: "r", default: "2" },
    "kv-type": { type: "string", default: "f16,q8_0" },
  },
  allowPositionals: true,
});
const shape = positionals[0] ?? "qwen3-0.6b";
const quant = values.quant!;
const depths = values.d!.split(",").map(Number);
const [pp, tg, reps] = [Number(values.p), Number(values.n), Number(values.r)];
const kvTypes = values["kv-type"]!.split(",") as KvDType[];
if (!isFileType(quant) || !isSyntheticShape(shape)) {
  console.error(`usage: bench:depth [shape] [--quant q] (shapes, quants of neuron bench)`);
  Deno.exit(2);
}

const path = syntheticModel(shape, quant);
const model = openModel(path);
const vocab = model.shape.vocabSize;
const maxTokens = Math.max(...depths) + Math.max(pp, tg) + 16;
const backend = new CpuBackend({ threads: 2 });
const probe = bandwidthProbeOf(backend)!;
const ours = kvTypes.map((t) => ModelBench.load(model, backend, maxTokens, t));
const refTypes = ["f16", ...kvTypes.filter((t) => t !== "f16")] as ("f16" | "q8_0" | "q4_0")[];
const refs = await Promise.all(
  refTypes.map((kvType) =>
    openLlamaModel(path, {
      contextLength: maxTokens,
      threads: 2,
      spin: true,
      kvType,
    })
  ),
);

console.log(`${shape} ${quant}, 2 threads; tok/s, median of ${reps}\n`);
const head = [...kvTypes.map((t) => `neuron ${t}`), ...refTypes.map((t) => `llama.cpp ${t}`)];
console.log(`| depth | test | ${head.join(" | ")} | neuron/llama.cpp (f16) | f16 tg vs bound |`);
console.log(`|---|---|${head.map(() => "---|").join("")}---|---|`);
const probeSamples: number[] = [];
for (const depth of depths) {
  const fill = benchPrompt(depth, vocab, 99);
  const rates = { pp: head.map(() => [] as number[]), tg: head.map(() => [] as number[]) };
  const bandwidths: number[] = [];
  for (let r = 1; r <= reps; r++) {
    ours.forEach((b, i) => {
      rates.pp[i].push(pp / b.prompt(pp, r, depth));
      rates.tg[i].push(tg / b.generate(tg, r, depth));
    });
    bandwidths.push(probe.bandwidthGBs());
    refs.forEach((ref, j) => {
      const t = ref.atDepth(fill, benchPrompt(pp, vocab, r), tg);
      rates.pp[ours.length + j].push(pp / t.ppSeconds);
      rates.tg[ours.length + j].push(tg / t.tgSeconds);
    });
  }
  probeSamples.push(...bandwidths);
  const f16 = kvTypes.indexOf("f16");
  for (const test of ["pp", "tg"] as const) {
    const m = rates[test].map(median);
    const ratio = f16 < 0 ? "-" : `${(m[f16] / m[ours.length]).toFixed(2)}x`;
    const bound = median(bandwidths) * 1e9 / ours[Math.max(f16, 0)].bytesPerToken(depth + tg / 2);
    const eff = test === "tg" && f16 >= 0 ? `${(100 * m[f16] / bound).toFixed(0)}%` : "";
    console.log(
      `| ${depth} | ${test}${test === "pp" ? pp : tg} | ${
        m.map((x) => x.toFixed(2)).join(" | ")
      } | ` +
        `${ratio} | ${eff} |`,
    );
  }
}
console.log(
  `\nbandwidth probe (neuron's pool, after each repetition's neuron tg): ${
    probeSamples.map((b) => b.toFixed(1)).join(", ")
  } GB/s`,
);
for (const r of refs) r.close();
for (const b of ours) b.close();
backend.close();
model.file.close();
