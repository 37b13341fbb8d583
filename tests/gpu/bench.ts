/**
 * GPU bench on synthetic Qwen3 models (written once, directly in quantized form): for
 * qwen3-0.6b Q8_0 and qwen3-8b Q4_K_M, pp512 (one 512-token batch) and tg128 (128 tokens
 * one at a time from an empty context, greedy on the device: one int back per token), the
 * device's copy bandwidth measured in the same run, and decode efficiency
 * = tg tok/s x bytes read per token / bandwidth. tg128 is also measured reading the whole
 * logits row back and taking the argmax on the host (as sampled sequences are picked), and
 * greedy on the device under a token mask (a structured-output grammar state's bitset,
 * every third token allowed), as constrained greedy sequences are picked.
 *
 *   deno run -A tests/gpu/bench.ts [--quick] [--depth 4096,16384] [--json FILE]
 *
 * --quick: a small synthetic shape and few tokens (a dry run of the script itself).
 * --depth: also decode after a context of each listed length (prefilled in chunks of
 * DEPTH_CHUNK tokens that ask for no logits, as the engine feeds a long prompt): tg at that
 * depth, the bytes a token reads there (weights + the f16 K/V of every position) and the
 * decode efficiency, so attention's share of a long-context decode step shows.
 * --moe: also qwen3-30b-a3b Q4_K_M (an 18.6 GB synthetic file, written on first use in
 * about three minutes): a decode step reads the dense weights and 8 of each layer's 128
 * experts, ~1.9 GB, so an H200's 4.8 TB/s bounds it near 2,500 tokens/s.
 * --models 0.6b,8b,30b: these models instead (30b alone measures the MoE kernels).
 * --streams 1,16 --contexts 0,4096,16384: decode with that many streams in one batch at
 * each context length (decode_grid.ts), each next to its bandwidth roofline; --contexts ""
 * skips the grid. NEURON_TEST_LIBCUDA / NEURON_TEST_LIBCUBLAS as for the GPU tests.
 */

import { parseArgs } from "node:util";
import { createCudaBackend } from "../../src/backend/cuda/mod.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import type { KvCache, StepLayout } from "../../src/backend/backend.ts";
import { openGguf, optionalNumber } from "../../src/gguf/mod.ts";
import type { GgufModel, Model } from "../../src/models/family.ts";
import { readModel } from "../../src/models/registry.ts";
import { argmax } from "../../src/common/argmax.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import type { FileType } from "../../src/gguf/quant_mix.ts";
import { gpuOptions } from "./support.ts";
import { SMALL_SHAPE } from "./checks/model.ts";
import { decodeGrid, type GridPoint } from "./decode_grid.ts";
import { type GpuModel, gpuModels } from "./models.ts";

interface DepthResult {
  depth: number;
  tg: number;
  tgTokens: number;
  bytesPerToken: number;
  kvBytesPerToken: number;
  decodeEfficiency: number;
}

interface Result {
  model: string;
  device: string;
  sizeMiB: number;
  loadSeconds: number;
  pp: number;
  ppTokens: number;
  tg: number;
  tgHostArgmax: number;
  tgMasked: number;
  tgTokens: number;
  /** Seconds of a verification step of VERIFY_K + 1 rows over those of a 1-row step. */
  verify: { k: number; stepRatio: number };
  bandwidthGBs: number;
  bytesPerToken: number;
  decodeEfficiency: number;
  graphSteps: number;
  captures: number;
  depths: DepthResult[];
  grid: GridPoint[];
}

const { values } = parseArgs({
  args: Deno.args,
  options: {
    quick: { type: "boolean" },
    moe: { type: "boolean" },
    models: { type: "string" },
    depth: { type: "string" },
    json: { type: "string" },
    streams: { type: "string" },
    contexts: { type: "string" },
  },
});
const quick = values.quick ?? false;
const PP = quick ? 32 : 512;
const TG = quick ? 8 : 128;
const REPS = quick ? 1 : 3;
const BLOCK = 16;
const DEPTHS = (values.depth ?? "").split(",").filter((d) => d !== "").map(Number);
if (!DEPTHS.every((d) => Number.isSafeInteger(d) && d > 0)) {
  throw new Error(`--depth ${values.depth}: positive integers, comma-separated`);
}
/** Tokens per prefill step when filling a context, and tokens decoded at each depth. */
const DEPTH_CHUNK = 2048;
const TG_DEPTH = quick ? 8 : 64;
const list = (v: string | undefined, fallback: string): number[] =>
  (v ?? fallback).split(",").filter((x) => x.trim() !== "").map(Number);
const GRID_STREAMS = list(values.streams, "1,16");
const GRID_CONTEXTS = list(values.contexts, quick ? "0,64,160" : "0,4096,16384");
const GRID_STEPS = quick ? 4 : 32;
/** Drafted tokens a speculative verification step checks (issue goal: <= 1.3x a 1-row step). */
const VERIFY_K = 4;
const VERIFY_STEPS = quick ? 2 : 24;

function smallPath(quant: FileType): string {
  const path = `${Deno.makeTempDirSync()}/small-${quant}.gguf`;
  writeSyntheticQwen3(path, { shape: SMALL_SHAPE, quant, seed: 3 });
  return path;
}

const CASES: GpuModel[] = quick
  ? [
    { label: "small Q8_0", path: () => smallPath("q8_0") },
    { label: "small Q4_K_M", path: () => smallPath("q4_k_m") },
  ]
  : gpuModels(values.models ?? (values.moe ? "0.6b,8b,30b" : "0.6b,8b"));

class Runner {
  readonly cache: KvCache;
  readonly table: Int32Array;

  constructor(readonly gguf: GgufModel, readonly model: Model, readonly be: CudaBackend) {
    const positions = Math.max(PP + TG, ...DEPTHS.map((d) => d + TG_DEPTH)) + 32;
    const nBlocks = Math.ceil(positions / BLOCK);
    this.table = Int32Array.from({ length: nBlocks }, (_, i) => i);
    this.cache = be.createKvCache({ ...model.kvShape, blockSize: BLOCK, nBlocks, dtype: "f16" });
  }

  /** Positions start.. of the sequence, whose table holds the blocks it has, as the engine's. */
  layout(n: number, start: number): StepLayout {
    const blockTable = this.table.subarray(0, Math.ceil((start + n) / BLOCK));
    return {
      positions: Int32Array.from({ length: n }, (_, i) => start + i),
      sequences: [{ rowStart: 0, rowCount: n, blockTable }],
    };
  }

  /** Seconds for an n-token prompt in one batch (logits of its last row, argmax on device). */
  prompt(n: number): number {
    const ids = Int32Array.from(
      { length: n },
      (_, i) => (i * 7919 + 13) % this.gguf.shape.vocabSize,
    );
    const t0 = performance.now();
    this.be.argmaxRows(
      this.model.forward(
        { ids, layout: this.layout(n, 0), logitRows: Int32Array.of(n - 1) },
        this.cache,
      ),
    );
    return (performance.now() - t0) / 1000;
  }

  /** Positions 0..n-1 filled in steps of DEPTH_CHUNK tokens that return no logits. */
  fill(n: number): void {
    for (let at = 0; at < n; at += DEPTH_CHUNK) {
      const len = Math.min(DEPTH_CHUNK, n - at);
      const ids = Int32Array.from(
        { length: len },
        (_, i) => ((at + i) * 7919 + 13) % this.gguf.shape.vocabSize,
      );
      this.model.forward(
        { ids, layout: this.layout(len, at), logitRows: new Int32Array(0) },
        this.cache,
      );
    }
    this.be.synchronize();
  }

  /**
   * Seconds for n tokens one at a time from position `start`; `host` reads every logits
   * row back, a `mask` makes the device pick under it.
   */
  generate(n: number, host: boolean, start = 0, mask?: Uint32Array): number {
    let next = 17;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const logits = this.model.forward(
        {
          ids: Int32Array.of(next),
          layout: this.layout(1, start + i),
          logitRows: Int32Array.of(0),
        },
        this.cache,
      );
      next = host ? argmax(this.be.read(logits)) : this.be.argmaxRows(logits, mask && [mask])[0];
    }
    return (performance.now() - t0) / 1000;
  }
}

/**
 * Seconds for n verification steps as speculative decoding runs them: k + 1 rows of one
 * sequence at consecutive positions from `start`, every row's logits picked on the device.
 */
function verify(r: Runner, n: number, k: number, start = 0): number {
  let next = 17;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const ids = Int32Array.from(
      { length: k + 1 },
      (_, j) => (next + 31 * j) % r.gguf.shape.vocabSize,
    );
    const logits = r.model.forward(
      { ids, layout: r.layout(k + 1, start + i * (k + 1)), logitRows: ids.map((_, j) => j) },
      r.cache,
    );
    next = r.be.argmaxRows(logits)[k];
  }
  return (performance.now() - t0) / 1000;
}

function best(reps: number, fn: () => number): number {
  let t = Infinity;
  for (let r = 0; r < reps; r++) t = Math.min(t, fn());
  return t;
}

function run(c: GpuModel): Result {
  const path = c.path();
  const file = openGguf(path);
  const be = createCudaBackend(gpuOptions());
  try {
    const t0 = performance.now();
    const gguf = readModel(file);
    const model = gguf.load(be);
    const loadSeconds = (performance.now() - t0) / 1000;
    const r = new Runner(gguf, model, be);
    r.prompt(16);
    r.generate(8, false);
    const pp = PP / best(REPS, () => r.prompt(PP));
    const tg = TG / best(REPS, () => r.generate(TG, false));
    const tgHostArgmax = TG / r.generate(TG, true);
    const mask = new Uint32Array(Math.ceil(gguf.shape.vocabSize / 32));
    for (let id = 0; id < gguf.shape.vocabSize; id += 3) mask[id >>> 5] |= 1 << (id & 31);
    const tgMasked = TG / best(REPS, () => r.generate(TG, false, 0, mask));
    verify(r, 2, VERIFY_K);
    const verifyStep = best(REPS, () => verify(r, VERIFY_STEPS, VERIFY_K)) / VERIFY_STEPS;
    const bandwidth = be.bandwidthGBs();
    const hp = gguf.shape;
    const tied = file.tensor("output.weight") === undefined;
    // Of a stack of experts a token reads the share it is routed to.
    const share = (optionalNumber(file, "qwen3moe.expert_used_count") ?? 1) /
      (optionalNumber(file, "qwen3moe.expert_count") ?? 1);
    const weights = file.tensors.reduce(
      (a, t) =>
        a +
        (t.name === "token_embd.weight" && !tied ? 0 : t.nBytes * (t.ne.length === 3 ? share : 1)),
      0,
    );
    // f16 K and V of one position over every layer.
    const kvPerPosition = 2 * hp.nLayers * hp.nKvHeads * hp.headDim * 2;
    const bytesPerToken = weights + kvPerPosition * (TG / 2);
    const depths = DEPTHS.map((depth): DepthResult => {
      r.fill(depth);
      r.generate(4, false, depth);
      const tgDepth = TG_DEPTH / best(REPS, () => r.generate(TG_DEPTH, false, depth));
      const kvBytes = kvPerPosition * (depth + TG_DEPTH / 2);
      return {
        depth,
        tg: tgDepth,
        tgTokens: TG_DEPTH,
        bytesPerToken: weights + kvBytes,
        kvBytesPerToken: kvBytes,
        decodeEfficiency: (tgDepth * (weights + kvBytes)) / (bandwidth * 1e9),
      };
    });
    const grid = GRID_CONTEXTS.length === 0 ? [] : decodeGrid(gguf, model, be, {
      streams: GRID_STREAMS,
      contexts: GRID_CONTEXTS,
      steps: GRID_STEPS,
      weightBytes: weights,
      bandwidthGBs: bandwidth,
    });
    const stats = be.stats();
    model.close();
    return {
      model: c.label,
      device: be.deviceName,
      sizeMiB: file.tensors.reduce((a, t) => a + t.nBytes, 0) / 2 ** 20,
      loadSeconds,
      pp,
      ppTokens: PP,
      tg,
      tgHostArgmax,
      tgMasked,
      tgTokens: TG,
      verify: { k: VERIFY_K, stepRatio: verifyStep * tg },
      bandwidthGBs: bandwidth,
      bytesPerToken,
      decodeEfficiency: (tg * bytesPerToken) / (bandwidth * 1e9),
      graphSteps: stats.graphSteps,
      captures: stats.captures,
      depths,
      grid,
    };
  } finally {
    be.close();
    file.close();
  }
}

// Written after each model, so a run cut short by its time limit keeps what it measured.
const results: Result[] = [];
for (const c of CASES) {
  results.push(run(c));
  if (values.json) Deno.writeTextFileSync(values.json, JSON.stringify(results, null, 2) + "\n");
}
console.log(
  `\n| model | size | pp${PP} t/s | tg${TG} t/s | tg${TG} host argmax | tg${TG} masked | copy GB/s | MB/token | decode efficiency |`,
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const r of results) {
  console.log(
    `| ${r.model} | ${r.sizeMiB.toFixed(0)} MiB | ${r.pp.toFixed(0)} | ${r.tg.toFixed(1)} | ` +
      `${r.tgHostArgmax.toFixed(1)} | ${r.tgMasked.toFixed(1)} | ${r.bandwidthGBs.toFixed(0)} | ${
        (r.bytesPerToken / 1e6).toFixed(1)
      } | ` +
      `${(100 * r.decodeEfficiency).toFixed(1)}% |`,
  );
}
if (DEPTHS.length > 0) {
  console.log(
    `\n| model | context | tg${TG_DEPTH} t/s | MB/token | K/V share of bytes | decode efficiency |`,
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const r of results) {
    for (const d of r.depths) {
      console.log(
        `| ${r.model} | ${d.depth} | ${d.tg.toFixed(1)} | ${
          (d.bytesPerToken / 1e6).toFixed(1)
        } | ` +
          `${(100 * d.kvBytesPerToken / d.bytesPerToken).toFixed(1)}% | ` +
          `${(100 * d.decodeEfficiency).toFixed(1)}% |`,
      );
    }
  }
}
console.log(
  `device: ${results[0]?.device}; graphs: ${
    results.map((r) => `${r.captures} captured, ${r.graphSteps} replayed`).join("; ")
  }`,
);
