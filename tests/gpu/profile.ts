/**
 * The steps tests/gpu/bench.ts times, one by one, for tests/gpu/profile.sh: per synthetic
 * model, a decode token of one stream, a decode step of 16 streams (both after a 512-token
 * context) and a 512-token prefill.
 *
 *   deno run -A tests/gpu/profile.ts --time [--models LIST]
 *     each step's wall time (median of its repeats) as one JSON line
 *   deno run -A tests/gpu/profile.ts --profile [--models LIST]
 *     each step once, warm (its graph captured), between cuProfilerStart and cuProfilerStop,
 *     so `ncu --profile-from-start off` records those kernels alone; every step ends with
 *     argmax_final, which is where profile_table.ts cuts the kernel list into steps. One JSON
 *     line per model names its steps in order.
 *
 * LIST (comma-separated, default 0.6b,8b,30b): 0.6b is qwen3-0.6b Q8_0, 8b qwen3-8b Q4_K_M,
 * 30b qwen3-30b-a3b Q4_K_M; small is the GPU checks' small shape in Q8_0, for a dry run on
 * the emulator.
 */

import { parseArgs } from "node:util";
import { createCudaBackend } from "../../src/backend/cuda/mod.ts";
import type { KvCache, StepLayout } from "../../src/backend/backend.ts";
import type { CudaBackend } from "../../src/backend/cuda/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import type { GgufModel, Model } from "../../src/models/family.ts";
import { readModel } from "../../src/models/registry.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import { gpuOptions } from "./support.ts";
import { SMALL_SHAPE } from "./checks/model.ts";
import { type GpuModel, gpuModels } from "./models.ts";
import { median } from "../../src/bench/runner.ts";

/** Besides the bench's models (models.ts), the GPU checks' small shape for dry runs. */
const SMALL: Record<string, GpuModel> = {
  small: {
    label: "small Q8_0",
    path: () => {
      const path = `${Deno.makeTempDirSync()}/small-q8_0.gguf`;
      writeSyntheticQwen3(path, { shape: SMALL_SHAPE, quant: "q8_0", seed: 3 });
      return path;
    },
  },
};
const CONTEXT = 512;
const STREAMS = 16;
const BLOCK = 16;
const REPS = { decode: 32, prefill: 4 };

const { values } = parseArgs({
  args: Deno.args,
  options: {
    time: { type: "boolean" },
    profile: { type: "boolean" },
    models: { type: "string", default: "0.6b,8b,30b" },
  },
});
if (values.time === values.profile) throw new Error("one of --time and --profile");

/** cuProfilerStart/Stop of the driver the backend loaded (the context is current here). */
function profiler(): { start(): void; stop(): void } {
  const lib = Deno.dlopen(gpuOptions().libcuda ?? "libcuda.so.1", {
    cuProfilerStart: { parameters: [], result: "i32" },
    cuProfilerStop: { parameters: [], result: "i32" },
  });
  const check = (what: string, rc: number): void => {
    if (rc !== 0) throw new Error(`${what} returned CUDA error ${rc}`);
  };
  return {
    start: () => check("cuProfilerStart", lib.symbols.cuProfilerStart()),
    stop: () => check("cuProfilerStop", lib.symbols.cuProfilerStop()),
  };
}

/** The three steps on one model; each returns its wall seconds. */
class Steps {
  readonly #cache: KvCache;
  readonly #tables: Int32Array[];
  #position = CONTEXT;

  constructor(readonly gguf: GgufModel, readonly model: Model, readonly be: CudaBackend) {
    const perStream = Math.ceil((CONTEXT + 4 * REPS.decode + 64) / BLOCK);
    this.#cache = be.createKvCache({
      ...model.kvShape,
      blockSize: BLOCK,
      nBlocks: STREAMS * perStream,
      dtype: "f16",
    });
    this.#tables = Array.from(
      { length: STREAMS },
      (_, s) => Int32Array.from({ length: perStream }, (_, i) => s * perStream + i),
    );
  }

  #run(ids: Int32Array, layout: StepLayout, logitRows: Int32Array): number {
    const t0 = performance.now();
    this.be.argmaxRows(this.model.forward({ ids, layout, logitRows }, this.#cache));
    return (performance.now() - t0) / 1000;
  }

  /** Stream 0's positions 0..CONTEXT-1 in one batch, logits of the last. */
  prefill(): number {
    const vocab = this.gguf.shape.vocabSize;
    const ids = Int32Array.from({ length: CONTEXT }, (_, i) => (i * 7919 + 13) % vocab);
    const layout: StepLayout = {
      positions: Int32Array.from({ length: CONTEXT }, (_, i) => i),
      sequences: [{
        rowStart: 0,
        rowCount: CONTEXT,
        blockTable: this.#tables[0].subarray(0, CONTEXT / BLOCK),
      }],
    };
    return this.#run(ids, layout, Int32Array.of(CONTEXT - 1));
  }

  /** One token for each of `streams` streams at the next position. */
  decode(streams: number): number {
    const at = this.#position++;
    const vocab = this.gguf.shape.vocabSize;
    const layout: StepLayout = {
      positions: new Int32Array(streams).fill(at),
      sequences: this.#tables.slice(0, streams).map((table, s) => ({
        rowStart: s,
        rowCount: 1,
        blockTable: table.subarray(0, Math.ceil((at + 1) / BLOCK)),
      })),
    };
    const ids = Int32Array.from({ length: streams }, (_, s) => (17 + 31 * s + at) % vocab);
    return this.#run(ids, layout, Int32Array.from({ length: streams }, (_, s) => s));
  }
}

for (const { label, path } of gpuModels(values.models, SMALL)) {
  const file = openGguf(path());
  const be = createCudaBackend(gpuOptions());
  try {
    const gguf = readModel(file);
    const model = gguf.load(be);
    const steps = new Steps(gguf, model, be);
    // Each step shape is recorded on its first sighting and captured on its second.
    for (let i = 0; i < 2; i++) steps.prefill();
    for (let i = 0; i < 3; i++) steps.decode(1), steps.decode(STREAMS);
    if (values.time) {
      const rows: [string, () => number, number][] = [
        ["decode 1", () => steps.decode(1), REPS.decode],
        [`decode ${STREAMS}`, () => steps.decode(STREAMS), REPS.decode],
        [`prefill ${CONTEXT}`, () => steps.prefill(), REPS.prefill],
      ];
      for (const [step, fn, reps] of rows) {
        const ms = 1000 * median(Array.from({ length: reps }, fn));
        console.log(JSON.stringify({ model: label, step, ms }));
      }
    } else {
      const p = profiler();
      p.start();
      steps.decode(1);
      steps.decode(STREAMS);
      steps.prefill();
      p.stop();
      console.log(
        JSON.stringify({
          model: label,
          steps: ["decode 1", `decode ${STREAMS}`, `prefill ${CONTEXT}`],
        }),
      );
    }
    model.close();
  } finally {
    be.close();
    file.close();
  }
}
