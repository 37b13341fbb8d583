/** Runs the serving benchmarks on a fresh engine Worker and formats what they measured. */

import type { DeviceChoice } from "../backend/mod.ts";
import { ModelHost } from "../harness/native/model_host.ts";
import {
  type ConcurrencyResult,
  type LatencyResult,
  type PrefixResult,
  ServingBench,
  type StreamMode,
} from "./serving.ts";

export interface ServingReport {
  concurrency: ConcurrencyResult[];
  /** The same streams with every output under the `--constrained` schema. */
  constrained?: ConcurrencyResult[];
  /** The same streams sampled at `--temperature`. */
  sampled?: ConcurrencyResult[];
  temperature?: number;
  top_p?: number;
  ttft_behind_long?: LatencyResult;
  prefix?: PrefixResult;
}

const SHORT_PROMPT = 32;
const LONG_PROMPT = 4096;
const SHARED_PROMPT = 2048;

export async function runServing(
  modelPath: string,
  device: DeviceChoice,
  cpu: { threads: number; mmap: boolean; repack: boolean },
  streams: number[],
  gen: number,
  variant: StreamMode = {},
): Promise<ServingReport> {
  const host = await ModelHost.start({
    modelPath,
    device,
    threads: cpu.threads,
    mmap: cpu.mmap,
    repack: cpu.repack,
    contextLength: 0,
    maxSequences: Math.max(...streams),
    maxBatchTokens: 512,
    kvDtype: "f16",
  });
  try {
    const bench = new ServingBench(host, host.description.vocabSize);
    await bench.warmUp(SHORT_PROMPT, gen);
    const concurrency: ConcurrencyResult[] = [];
    const other: ConcurrencyResult[] = [];
    for (const n of streams) {
      concurrency.push(await bench.concurrency(n, SHORT_PROMPT, gen));
      if (variant.constraint || variant.temperature) {
        other.push(await bench.concurrency(n, SHORT_PROMPT, gen, variant));
      }
    }
    if (variant.constraint) return { concurrency, constrained: other };
    if (variant.temperature) {
      return { concurrency, sampled: other, temperature: variant.temperature, top_p: variant.topP };
    }
    const ttft_behind_long = await bench.latencyBehindLongPrompt(LONG_PROMPT, SHORT_PROMPT);
    const prefix = await bench.prefixCache(SHARED_PROMPT);
    return { concurrency, ttft_behind_long, prefix };
  } finally {
    await host.close();
  }
}

export function printServing(r: ServingReport): void {
  if (r.constrained) return printPair(r.concurrency, r.constrained, "free", "constrained");
  if (r.sampled) {
    const label = `T = ${r.temperature}` + (r.top_p === undefined ? "" : `, top-p ${r.top_p}`);
    return printPair(r.concurrency, r.sampled, "greedy", label);
  }
  console.log("\n| streams | aggregate tg t/s | x single | mean TTFT ms |");
  console.log("| ---: | ---: | ---: | ---: |");
  const single = r.concurrency[0]?.tg ?? NaN;
  for (const c of r.concurrency) {
    console.log(
      `| ${c.streams} | ${c.tg.toFixed(2)} | ${(c.tg / single).toFixed(2)} | ${
        c.ttft_ms.toFixed(0)
      } |`,
    );
  }
  const l = r.ttft_behind_long!;
  console.log(
    `\nTTFT of a ${SHORT_PROMPT}-token request: ${l.unloaded_ms.toFixed(0)} ms unloaded, ` +
      `${l.behind_ms.toFixed(0)} ms behind a ${l.long_prompt_tokens}-token prompt ` +
      `(${(l.behind_ms / l.unloaded_ms).toFixed(2)}x; mean of ${l.behind_samples}, ` +
      `worst ${l.behind_max_ms.toFixed(0)} ms)`,
  );
  const p = r.prefix!;
  console.log(
    `prefix cache: ${p.cached_tokens} of ${p.prompt_tokens} prompt tokens cached ` +
      `(${((100 * p.cached_tokens) / p.prompt_tokens).toFixed(1)}%); TTFT ${
        p.first_ttft_ms.toFixed(0)
      } ms ` +
      `-> ${p.second_ttft_ms.toFixed(0)} ms (${
        (p.first_ttft_ms / p.second_ttft_ms).toFixed(1)
      }x lower)`,
  );
}

/** Each stream count's aggregate decode both ways, side by side. */
function printPair(a: ConcurrencyResult[], b: ConcurrencyResult[], as: string, bs: string): void {
  console.log(`\n| streams | tg t/s ${as} | tg t/s ${bs} | ${bs} / ${as} |`);
  console.log("| ---: | ---: | ---: | ---: |");
  a.forEach((c, i) => {
    const k = b[i];
    console.log(
      `| ${c.streams} | ${c.tg.toFixed(2)} | ${k.tg.toFixed(2)} | ${(k.tg / c.tg).toFixed(3)} |`,
    );
  });
}
