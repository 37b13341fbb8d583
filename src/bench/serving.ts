/**
 * Serving benchmarks through the engine Worker, as a node runs it: aggregate decode speed
 * with N concurrent streams, time to first token of a short request that arrives while a
 * long prompt is being prefilled (chunked prefill at work), and the prefix cache on a
 * shared long system prompt.
 */

import type { OutputConstraint } from "../constrain/mod.ts";
import { GREEDY } from "../engine/mod.ts";
import type { GenerateRequest } from "../frontend/mod.ts";
import type { ModelHost } from "../harness/native/model_host.ts";
import { mean } from "./runner.ts";

export interface ConcurrencyResult {
  streams: number;
  /** Aggregate decode tokens/s over all streams (engine time spent decoding). */
  tg: number;
  /** Mean time to first token, ms. */
  ttft_ms: number;
}

/** Mean gap between the short requests sent while the long prompt is prefilled. */
const ARRIVAL_GAP_MS = 1500;

export interface LatencyResult {
  unloaded_ms: number;
  /** Mean TTFT of the short requests that arrived during the long prefill. */
  behind_ms: number;
  behind_max_ms: number;
  behind_samples: number;
  long_prompt_tokens: number;
}

export interface PrefixResult {
  prompt_tokens: number;
  cached_tokens: number;
  first_ttft_ms: number;
  second_ttft_ms: number;
}

function randomTokens(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0;
  // Stay clear of the special tokens at the end of the vocabulary.
  const range = Math.min(vocab, 151000);
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % range;
  });
}

interface Timed {
  ttftMs: number;
  tokens: number;
  cached: number;
}

async function timed(host: ModelHost, request: GenerateRequest): Promise<Timed> {
  const t0 = performance.now();
  const stream = await host.generate(request);
  let ttftMs = NaN;
  let tokens = 0;
  let cached = 0;
  for await (const ev of stream) {
    if (ev.type === "delta" && ev.tokens.length > 0) {
      if (Number.isNaN(ttftMs)) ttftMs = performance.now() - t0;
      tokens += ev.tokens.length;
    } else if (ev.type === "done") {
      if (ev.fault) throw new Error(`${ev.fault.code}: ${ev.fault.message}`);
      cached = ev.usage.cachedTokens;
    }
  }
  return { ttftMs, tokens, cached };
}

/** How the concurrency streams pick their tokens: greedily unless these say otherwise. */
export interface StreamMode {
  /** Every output under this constraint (structured output). */
  constraint?: OutputConstraint;
  /** Sampled at this temperature (seeded per request) instead of greedy. */
  temperature?: number;
  /** With a temperature: the smallest set of best tokens holding this share of the mass. */
  topP?: number;
}

function request(
  id: string,
  ids: number[],
  maxTokens: number,
  mode: StreamMode = {},
  seed = 0,
): GenerateRequest {
  const temperature = mode.temperature ?? 0;
  return {
    id,
    prompt: { kind: "tokens", ids },
    maxTokens,
    sampling: temperature > 0 ? { ...GREEDY, temperature, topP: mode.topP ?? 1, seed } : GREEDY,
    ignoreEos: true,
    ...(mode.constraint ? { constraint: mode.constraint } : {}),
  };
}

export class ServingBench {
  #n = 0;

  constructor(readonly host: ModelHost, readonly vocab: number) {}

  #id(): string {
    return `bench-${++this.#n}`;
  }

  /**
   * One request, its result dropped: the first requests after a load run slower
   * (qwen3moe-mini Q4_K_M, one stream right after the load: 123.85 tok/s, then 131.50 and
   * 135.31 in the same run), which would flatter every ratio against one stream.
   */
  async warmUp(prompt: number, gen: number): Promise<void> {
    await timed(this.host, request(this.#id(), randomTokens(prompt, this.vocab, 1), gen));
  }

  /**
   * N streams of `gen` tokens each after a `prompt`-token prompt, all at once. With a
   * constraint, a stream whose output is complete before `gen` tokens starts another
   * request at once, so that N sequences decode together throughout.
   */
  async concurrency(
    streams: number,
    prompt: number,
    gen: number,
    mode: StreamMode = {},
  ): Promise<ConcurrencyResult> {
    const before = await this.host.stats();
    const stream = async (i: number): Promise<Timed> => {
      let first: Timed | undefined;
      for (let made = 0; made < gen;) {
        const ids = randomTokens(prompt, this.vocab, this.#n * 7919 + i);
        const run = await timed(this.host, request(this.#id(), ids, gen - made, mode, i));
        first ??= run;
        made += Math.max(1, run.tokens);
      }
      return first!;
    };
    const runs = await Promise.all(Array.from({ length: streams }, (_, i) => stream(i)));
    const after = await this.host.stats();
    const tokens = after.decodeTokens - before.decodeTokens;
    const seconds = after.decodeSeconds - before.decodeSeconds;
    return {
      streams,
      tg: seconds > 0 ? tokens / seconds : 0,
      ttft_ms: mean(runs.map((r) => r.ttftMs)),
    };
  }

  /** TTFT of a short request alone, then arriving while a long prompt is prefilled. */
  async latencyBehindLongPrompt(longTokens: number, shortTokens: number): Promise<LatencyResult> {
    const short = (): GenerateRequest =>
      request(this.#id(), randomTokens(shortTokens, this.vocab, this.#n * 31), 4);
    await timed(this.host, short());
    const unloaded = mean([
      (await timed(this.host, short())).ttftMs,
      (await timed(this.host, short())).ttftMs,
    ]);
    let longDone = false;
    const long = timed(this.host, request(this.#id(), randomTokens(longTokens, this.vocab, 99), 4))
      .finally(() => (longDone = true));
    // Arrivals all through the long prompt's prefill, shallow and deep, each at a random
    // moment of the step in flight.
    const behind: number[] = [];
    const jitter = randomTokens(64, 1000, 7);
    while (!longDone) {
      await new Promise((r) =>
        setTimeout(r, ARRIVAL_GAP_MS * (0.5 + jitter[behind.length % 64] / 1000))
      );
      if (longDone) break;
      behind.push((await timed(this.host, short())).ttftMs);
    }
    await long;
    return {
      unloaded_ms: unloaded,
      behind_ms: behind.length > 0 ? mean(behind) : NaN,
      behind_max_ms: behind.length > 0 ? Math.max(...behind) : NaN,
      behind_samples: behind.length,
      long_prompt_tokens: longTokens,
    };
  }

  /** Two requests sharing a long system prompt: the second reuses its cached blocks. */
  async prefixCache(systemTokens: number): Promise<PrefixResult> {
    const system = randomTokens(systemTokens, this.vocab, 4242 + this.#n);
    const first = await timed(this.host, request(this.#id(), [...system, 11, 12, 13], 4));
    const second = await timed(this.host, request(this.#id(), [...system, 21, 22, 23, 24], 4));
    return {
      prompt_tokens: systemTokens + 4,
      cached_tokens: second.cached,
      first_ttft_ms: first.ttftMs,
      second_ttft_ms: second.ttftMs,
    };
  }
}
