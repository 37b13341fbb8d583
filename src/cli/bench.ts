import { bandwidthProbeOf, type KvDType, opProfilerOf } from "../backend/backend.ts";
import { errorMessage } from "../common/errors.ts";
import { checkConstraint, ConstraintError, type OutputConstraint } from "../constrain/mod.ts";
import { createBackend, type DeviceChoice } from "../backend/mod.ts";
import { quantizationOf } from "../harness/native/describe.ts";
import { openModel } from "../runner/mod.ts";
import { mean, type Measurement, median, ModelBench, stddev } from "../bench/runner.ts";
import { type DepthMeasurement, kvRatios, runDepths } from "../bench/depth_runs.ts";
import {
  FILE_TYPE_NAMES,
  isFileType,
  isSyntheticShape,
  SYNTHETIC_SHAPES,
  syntheticModel,
} from "../bench/synthetic.ts";
import { printServing, runServing } from "../bench/serving_report.ts";
import { printVerification, verificationCost } from "../bench/verification.ts";
import { type Command, countFlag, EXIT_OK, parseFlags } from "./command.ts";
import { UsageError } from "./errors.ts";

const HELP = `usage: neuron bench (--model FILE | --synthetic SHAPE --quant QUANT)
                    [-p 128,512] [-n 128] [-d 0,8192] [-r REPS] [-t THREADS]
                    [--kv-type f16,q8_0,q4_0] [--device D] [--mmap 0|1] [--repack 0|1]
                    [--concurrency 1,4,16,32] [--constrained SCHEMA.json]
                    [--temperature T [--top-p P]] [--profile] [--json]

Measures prompt processing (pp N: N tokens in one batch) and text generation (tg N: N
tokens one at a time) in tokens/s, like llama-bench, at each depth (positions already in
the KV cache), plus the memory read bandwidth measured in the same run (the median of one
measurement after each repetition of the first tg test; each the fastest pass over a
buffer on huge pages in several access patterns, all threads), what decode reads per
second (weights and the K/V at that depth per token x tg tok/s) and the decode
efficiency: the second over the first.

  -m, --model FILE     GGUF model
      --synthetic S    a synthetic model of shape S (${SYNTHETIC_SHAPES.join(", ")}),
                       written once to the cache directory
      --quant Q        its quantization (${FILE_TYPE_NAMES.join(", ")})
  -p, --prompt LIST    prompt lengths (default 512)
  -n, --gen LIST       generation lengths (default 128)
  -d, --depth LIST     cache depths the tests run after (default 0), as llama-bench -d
      --kv-type LIST   KV cache types: f16 (default), q8_0, q4_0; several are measured
                       side by side (each repetition runs every type in turn), with each
                       type's tok/s against the first's
  -r, --reps N         repetitions of each test (default 3)
  -t, --threads N      CPU threads (default: all cores)
      --device D       auto | cpu | cuda (default auto)
      --mmap 0|1       CPU: 1 reads weights in place from the mmapped file (default),
                       0 copies them onto huge pages at load (llama.cpp's --no-mmap)
      --repack 0|1     CPU: 1 repacks Q8_0, Q4_K and Q6_K matrices at load for batched
                       products (default), 0 keeps the GGUF layout
  -c, --concurrency L  also serve L concurrent streams each (32-token prompts, -n tokens)
                       through the engine: aggregate decode tok/s and time to first
                       token; then TTFT of a short request behind a 4k-token prompt and
                       the prefix cache on a 2k-token shared prompt
      --constrained F  with -c: only the decode speeds, free and with every output under
                       the JSON schema in file F (structured output), side by side
      --temperature T  with -c: only the decode speeds, greedy and sampled at T > 0
                       (seeded), side by side
      --top-p P        with --temperature: the sampled streams keep the top P of the mass
      --profile        CPU: also time each op of the greedy one-token step and k = 4
                       verification (ms a step, by op; the JSON's verification.profile)
      --json           print {"pp", "tg", "bandwidth_gbs", "bytes_per_token", "decode_gbs",
                       "decode_efficiency", "results": [{"test", "depth", "kv_type", "tok_s",
                       ...}], "kv_ratios": [...]} (the top-level figures are the first
                       depth's, on the first cache type)
  -h, --help           this text`;

function list(name: string, value: string | undefined, fallback: number[], min = 1): number[] {
  if (value === undefined) return fallback;
  const xs = value.split(",").map((s) => Number(s.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isSafeInteger(x) || x < min)) {
    const what = min === 0 ? "non-negative" : "positive";
    throw new UsageError(`bench: ${name} must be a comma-separated list of ${what} integers`);
  }
  return xs;
}

const KV_TYPES: readonly KvDType[] = ["f16", "q8_0", "q4_0"];

function kvTypes(value: string | undefined): KvDType[] {
  const types = (value ?? "f16").split(",").map((t) => t.trim() as KvDType);
  for (const t of types) {
    if (!KV_TYPES.includes(t)) {
      throw new UsageError(`bench: --kv-type takes ${KV_TYPES.join(", ")}, got "${t}"`);
    }
  }
  if (new Set(types).size !== types.length) {
    throw new UsageError(`bench: --kv-type names "${value}" a type twice`);
  }
  return types;
}

/** A test at a depth, named as llama-bench names it. */
function testName(m: DepthMeasurement): string {
  return m.depth === 0 ? m.test : `${m.test} @ d${m.depth}`;
}

function modelPath(values: { model?: string; synthetic?: string; quant?: string }): string {
  if ((values.model === undefined) === (values.synthetic === undefined)) {
    throw new UsageError("bench: give either --model or --synthetic");
  }
  if (values.model !== undefined) {
    if (values.quant !== undefined) {
      throw new UsageError(
        "bench: --quant goes with --synthetic (a --model file is measured as it is)",
      );
    }
    return values.model;
  }
  const shape = values.synthetic!;
  const quant = values.quant ?? "q8_0";
  if (!isSyntheticShape(shape)) {
    throw new UsageError(
      `bench: unknown synthetic shape "${shape}" (${SYNTHETIC_SHAPES.join(", ")})`,
    );
  }
  if (!isFileType(quant)) {
    throw new UsageError(`bench: unknown quantization "${quant}" (${FILE_TYPE_NAMES.join(", ")})`);
  }
  return syntheticModel(shape, quant);
}

/** The JSON schema in `file` as an output constraint, refused (exit 2) when it cannot be. */
async function schemaConstraint(file: string): Promise<OutputConstraint> {
  let schema: unknown;
  try {
    schema = JSON.parse(await Deno.readTextFile(file));
  } catch (err) {
    throw new UsageError(`bench: --constrained ${file}: ${errorMessage(err)}`);
  }
  const constraint: OutputConstraint = { text: { kind: "json", schema } };
  try {
    checkConstraint(constraint, { text: file, tool: () => file });
  } catch (err) {
    if (err instanceof ConstraintError) throw new UsageError(`bench: --constrained ${err.message}`);
    throw err;
  }
  return constraint;
}

function rate(m: Measurement): string {
  return `${mean(m.samples).toFixed(2)} ± ${stddev(m.samples).toFixed(2)}`;
}

export const benchCommand: Command = {
  summary: "measure prompt and generation speed (llama-bench style)",
  async run(args: string[]): Promise<number> {
    const parsed = parseFlags({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        model: { type: "string", short: "m" },
        synthetic: { type: "string" },
        quant: { type: "string" },
        prompt: { type: "string", short: "p" },
        gen: { type: "string", short: "n" },
        depth: { type: "string", short: "d" },
        "kv-type": { type: "string" },
        reps: { type: "string", short: "r" },
        threads: { type: "string", short: "t" },
        device: { type: "string" },
        mmap: { type: "string" },
        repack: { type: "string" },
        concurrency: { type: "string", short: "c" },
        constrained: { type: "string" },
        temperature: { type: "string" },
        "top-p": { type: "string" },
        profile: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
    const { values } = parsed;
    if (values.help) {
      console.log(HELP);
      return EXIT_OK;
    }
    const prompts = list("-p", values.prompt, [512]);
    const gens = list("-n", values.gen, [128]);
    const depths = list("-d", values.depth, [0], 0);
    const kvs = kvTypes(values["kv-type"]);
    const reps = Math.max(1, countFlag("bench", "-r", values.reps, 3));
    const threads = countFlag("bench", "-t", values.threads, 0);
    const concurrency = values.concurrency === undefined
      ? []
      : list("--concurrency", values.concurrency, []);
    const temperature = temperatureFlag(values.temperature);
    if (temperature !== undefined && (concurrency.length === 0 || values.constrained)) {
      throw new UsageError("bench: --temperature goes with --concurrency, without --constrained");
    }
    const topP = topPFlag(values["top-p"]);
    if (topP !== undefined && temperature === undefined) {
      throw new UsageError("bench: --top-p goes with --temperature");
    }
    const device = (values.device ?? "auto") as DeviceChoice;
    if (!["auto", "cpu", "cuda"].includes(device)) {
      throw new UsageError(`bench: unknown device "${device}"`);
    }
    if (values.mmap !== undefined && !["0", "1"].includes(values.mmap)) {
      throw new UsageError(`bench: --mmap takes 0 or 1, got "${values.mmap}"`);
    }
    const mmap = values.mmap !== "0";
    if (values.repack !== undefined && !["0", "1"].includes(values.repack)) {
      throw new UsageError(`bench: --repack takes 0 or 1, got "${values.repack}"`);
    }
    const repack = values.repack !== "0";
    const path = modelPath(values);

    const model = openModel(path);
    const file = model.file;
    const backend = createBackend(device, { threads, mmap, repack });
    const profiler = values.profile ? opProfilerOf(backend) : null;
    if (values.profile && profiler === null) {
      backend.close();
      file.close();
      throw new UsageError(`bench: --profile: the ${backend.kind} backend does not time its ops`);
    }
    const maxTokens = Math.max(...depths) + Math.max(...prompts, ...gens) + 16;
    // One bench per cache type, each loading the model onto the backend: a cache's type is
    // fixed when it is made.
    const benches: ModelBench[] = [];
    try {
      for (const kv of kvs) benches.push(ModelBench.load(model, backend, maxTokens, kv));
      // Bandwidth is sampled after each repetition of each depth's first tg test, and the
      // median taken: on a shared host it drifts by 10-20% within a minute, so a figure
      // taken once, before or after, is a different moment than the decode it is compared
      // with.
      const bandwidths: number[] = [];
      const probe = bandwidthProbeOf(backend);
      const sampleBandwidth = () => bandwidths.push(probe?.bandwidthGBs() ?? NaN);
      const results = runDepths(benches, { depths, prompts, gens, reps }, sampleBandwidth);
      const bandwidth = median(bandwidths);
      const verification = verificationCost(benches[0], depths[0], profiler);
      // What decode reads per second against what the probe could read: both in GB/s. A
      // token of tg N at depth d reads the K/V of d + N/2 positions on average.
      const decode = depths.flatMap((depth) =>
        benches.map((bench) => {
          const tg = results.find((m) =>
            m.depth === depth && m.kvType === bench.kvType && m.test === `tg${gens[0]}`
          )!;
          const bytesPerToken = bench.bytesPerToken(depth + gens[0] / 2);
          const tgRate = mean(tg.samples);
          const decodeGBs = tgRate * bytesPerToken / 1e9;
          const efficiency = decodeGBs / bandwidth;
          return { depth, kvType: bench.kvType, tgRate, bytesPerToken, decodeGBs, efficiency };
        })
      );
      const ratios = kvRatios(results, kvs);
      const label = `${values.synthetic ?? path.split("/").at(-1)} ${quantizationOf(file)}`;
      const size = file.tensorBytes;
      const params = file.tensors.reduce((a, t) => a + t.nElements, 0);
      const nThreads = "pool" in backend ? (backend.pool as { threads: number }).threads : threads;
      if (values.json) {
        const first = decode[0];
        console.log(JSON.stringify({
          pp: mean(results.find((m) => m.test.startsWith("pp"))!.samples),
          tg: first.tgRate,
          bandwidth_gbs: bandwidth,
          bandwidth_samples_gbs: bandwidths,
          bytes_per_token: first.bytesPerToken,
          decode_gbs: first.decodeGBs,
          decode_efficiency: first.efficiency,
          kv_type: kvs[0],
          kv_types: kvs,
          depths: decode.map((d) => ({
            depth: d.depth,
            kv_type: d.kvType,
            bytes_per_token: d.bytesPerToken,
            decode_gbs: d.decodeGBs,
            decode_efficiency: d.efficiency,
          })),
          model: label,
          backend: backend.kind,
          threads: nThreads,
          mmap,
          repack,
          verification,
          kv_ratios: ratios.map((r) => ({
            test: r.test,
            depth: r.depth,
            kv_type: r.kvType,
            baseline: r.baseline,
            ratio: r.ratio,
          })),
          results: results.map((m) => ({
            test: m.test,
            depth: m.depth,
            kv_type: m.kvType,
            tok_s: mean(m.samples),
            stddev: stddev(m.samples),
          })),
        }));
      } else {
        const head = `| model | size | params | backend | threads | mmap | kv | test | t/s |`;
        console.log(head);
        console.log("| --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |");
        for (const m of results) {
          console.log(
            `| ${label} | ${(size / 2 ** 20).toFixed(2)} MiB | ${(params / 1e6).toFixed(2)} M | ` +
              `${backend.kind} | ${nThreads} | ${mmap ? 1 : 0} | ${m.kvType} | ${testName(m)} | ` +
              `${rate(m)} |`,
          );
        }
        console.log(
          `\nmemory read bandwidth ${bandwidth.toFixed(1)} GB/s (probe, median of ` +
            `${bandwidths.map((b) => b.toFixed(1)).join(", ")})`,
        );
        const kvNote = (kv: KvDType) => kvs.length > 1 ? `, ${kv} KV` : "";
        for (const d of decode) {
          console.log(
            `depth ${d.depth}${kvNote(d.kvType)}: decode reads ${d.decodeGBs.toFixed(1)} GB/s ` +
              `(${(d.bytesPerToken / 1e6).toFixed(1)} MB/token x ${d.tgRate.toFixed(2)} tok/s, ` +
              `tg${gens[0]}); decode efficiency ${(d.efficiency * 100).toFixed(1)}%`,
          );
        }
        for (const r of ratios) {
          console.log(
            `depth ${r.depth}: ${r.test} with ${r.kvType} KV at ${r.ratio.toFixed(2)}x the ` +
              `tok/s of ${r.baseline} KV (repetitions alternated)`,
          );
        }
        printVerification(verification);
      }
    } finally {
      for (const bench of benches) bench.close();
      backend.close();
      file.close();
    }
    const constraint = values.constrained === undefined
      ? undefined
      : await schemaConstraint(values.constrained);
    if (constraint && concurrency.length === 0) {
      throw new UsageError("bench: --constrained goes with --concurrency");
    }
    if (concurrency.length > 0) {
      const serving = await runServing(
        path,
        device,
        { threads, mmap, repack },
        concurrency,
        gens[0],
        { constraint, temperature, topP },
      );
      if (values.json) console.log(JSON.stringify(serving));
      else printServing(serving);
    }
    return EXIT_OK;
  },
};

function temperatureFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Number(value);
  if (!(t > 0 && t <= 2)) {
    throw new UsageError(`bench: --temperature takes a number in (0, 2], got "${value}"`);
  }
  return t;
}

function topPFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const p = Number(value);
  if (!(p > 0 && p <= 1)) {
    throw new UsageError(`bench: --top-p takes a number in (0, 1], got "${value}"`);
  }
  return p;
}
