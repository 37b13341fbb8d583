/**
 * `deno task bench:embeddings [--inputs 256] [--tokens 64] [--threads N] [--rounds 3]
 * [--json]`: embeddings per second on the CPU for N inputs of T tokens, neuron and
 * llama.cpp on the same file in the same run: the synthetic Qwen3-0.6B Q8_0 of `deno task
 * bench` with `qwen3.pooling_type` last (written once beside it). Neuron takes the inputs
 * as one `/v1/embeddings` request takes them: one model session with the native harness's
 * settings (8 sequences and 512 tokens per step), its engine batching them; llama.cpp as
 * its embedding example batches them (whole inputs, 8 sequences and 512 tokens per
 * llama_decode). Both on the same threads, alternated, the best round of each; the
 * vectors are compared too. Needs a quiet machine: absolute figures move with load.
 */

import { openLlamaModel } from "../support/llama_ref.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { cacheDir, syntheticModel } from "../../src/bench/synthetic.ts";
import { Kv, Rng } from "../../src/gguf/mod.ts";
import { ModelSession } from "../../src/harness/native/model_session.ts";
import { cosine } from "../embeddings/support.ts";

function flag(name: string, fallback: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  const v = i >= 0 ? Number(Deno.args[i + 1]) : fallback;
  if (!Number.isSafeInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer`);
  return v;
}

const INPUTS = flag("inputs", 256);
const TOKENS = flag("tokens", 64);
const THREADS = flag("threads", navigator.hardwareConcurrency);
const ROUNDS = flag("rounds", 3);
/** The native harness's defaults: max_in_flight, MAX_BATCH_TOKENS, step_target_ms. */
const SEQUENCES = 8;
const BATCH_TOKENS = 512;

function embeddingModel(): string {
  const path = `${cacheDir()}/synthetic/qwen3-0.6b-q8_0-embed-last.gguf`;
  try {
    Deno.statSync(path);
    return path;
  } catch {
    return writeVariant(syntheticModel("qwen3-0.6b", "q8_0"), path, (kv) => {
      kv.set("qwen3.pooling_type", Kv.u32(3));
    });
  }
}

/** Distinct inputs (no prefix shared, none served from the cache) of plain token ids. */
function inputs(n: number, seed: number): number[][] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => Array.from({ length: TOKENS }, () => rng.u32() % 151000));
}

const path = embeddingModel();
const warm = inputs(SEQUENCES, 1);
const timed = inputs(INPUTS, 2);

const session = ModelSession.open({
  modelPath: path,
  device: "cpu",
  threads: THREADS,
  contextLength: 2048,
  maxSequences: SEQUENCES,
  maxBatchTokens: BATCH_TOKENS,
  kvDtype: "f16",
});
const ref = await openLlamaModel(path, { threads: THREADS, contextLength: 1024 });

async function neuron(batch: number[][]): Promise<Float32Array[]> {
  const { result } = await session.pool({
    id: crypto.randomUUID(),
    inputs: batch.map((ids) => ({ kind: "tokens", ids })),
  });
  while (session.hasWork) session.step();
  return (await result).vectors;
}

/** Seconds of `run`, and what it returned. */
async function timedRun<T>(run: () => Promise<T> | T): Promise<[number, T]> {
  const t = performance.now();
  const out = await run();
  return [(performance.now() - t) / 1000, out];
}

await neuron(warm);
ref.embedMany(warm, SEQUENCES);
// Alternated, best of each: a burst of load elsewhere on the machine hits one round, not
// one side.
let neuronSecs = Infinity, llamaSecs = Infinity;
let ours: Float32Array[] = [], theirs: Float32Array[] = [];
for (let round = 0; round < ROUNDS; round++) {
  const [a, x] = await timedRun(() => neuron(timed));
  const [b, y] = await timedRun(() => ref.embedMany(timed, SEQUENCES));
  [neuronSecs, llamaSecs, ours, theirs] = [Math.min(neuronSecs, a), Math.min(llamaSecs, b), x, y];
}
const steps = session.stats();
session.close();
ref.close();

const agreement = Math.min(...ours.map((v, i) => cosine(v, theirs[i])));
const report = {
  model: path,
  inputs: INPUTS,
  tokens: TOKENS,
  threads: THREADS,
  rounds: ROUNDS,
  neuron_embeddings_per_s: INPUTS / neuronSecs,
  llama_cpp_embeddings_per_s: INPUTS / llamaSecs,
  ratio: llamaSecs / neuronSecs,
  neuron_mean_step_tokens: steps.meanBatchTokens,
  min_cosine: agreement,
};
if (Deno.args.includes("--json")) {
  console.log(JSON.stringify(report));
} else {
  console.log(`${INPUTS} inputs of ${TOKENS} tokens, ${THREADS} threads, ${path}`);
  console.log(`neuron     ${report.neuron_embeddings_per_s.toFixed(2)} embeddings/s`);
  console.log(`llama.cpp  ${report.llama_cpp_embeddings_per_s.toFixed(2)} embeddings/s`);
  console.log(`ratio      ${report.ratio.toFixed(2)}x (min cosine ${agreement.toFixed(5)})`);
}
