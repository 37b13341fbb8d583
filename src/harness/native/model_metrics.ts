/**
 * Per-model serving numbers for /health and /metrics: request outcomes, token counts,
 * time to first token, inter-token latency, and recent prefill/decode speed (tokens per
 * second of engine time, from the engine's own counters).
 */

import type { EngineStats } from "../../engine/mod.ts";
import type { HistogramSnapshot, SchedulerStats } from "../harness.ts";
import { Histogram, ITL_BUCKETS, TTFT_BUCKETS } from "./histogram.ts";

/** How a request ended: `rejected` never ran (queue full or too long a wait). */
export type Outcome = "completed" | "cancelled" | "failed" | "rejected";

const SMOOTHING = 0.5;

export class ModelMetrics {
  readonly ttft = new Histogram(TTFT_BUCKETS);
  readonly itl = new Histogram(ITL_BUCKETS);
  readonly outcomes: Record<Outcome, number> = {
    completed: 0,
    cancelled: 0,
    failed: 0,
    rejected: 0,
  };
  promptTokens = 0;
  completionTokens = 0;
  tokSPrefill = 0;
  tokSDecode = 0;
  #last: EngineStats | null = null;

  outcome(o: Outcome): void {
    this.outcomes[o]++;
  }

  /** Folds a new reading of the engine's counters into the recent speeds. */
  engineStats(s: EngineStats): void {
    const last = this.#last ??
      { ...s, prefillTokens: 0, prefillSeconds: 0, decodeTokens: 0, decodeSeconds: 0 };
    this.#last = s;
    const rate = (tokens: number, secs: number, prev: number): number => {
      if (tokens <= 0 || secs <= 0) return prev;
      const now = tokens / secs;
      return prev === 0 ? now : SMOOTHING * prev + (1 - SMOOTHING) * now;
    };
    this.tokSPrefill = rate(
      s.prefillTokens - last.prefillTokens,
      s.prefillSeconds - last.prefillSeconds,
      this.tokSPrefill,
    );
    this.tokSDecode = rate(
      s.decodeTokens - last.decodeTokens,
      s.decodeSeconds - last.decodeSeconds,
      this.tokSDecode,
    );
  }

  /** The scheduler as last read from the engine (absent before the first reading). */
  scheduler(): SchedulerStats | undefined {
    const s = this.#last;
    if (s === null) return undefined;
    return {
      running: s.running,
      waiting: s.waiting,
      kv_blocks_used: s.kvBlocksUsed,
      kv_blocks_free: s.kvBlocksFree,
      kv_blocks_cached: s.kvBlocksCached,
      prefix_hit_rate: s.prefixLookups === 0 ? 0 : s.prefixHits / s.prefixLookups,
      preemptions: s.preemptions,
      mean_batch_tokens: s.meanBatchTokens,
      spec_verifications: s.specVerifications,
      spec_drafted_tokens: s.specDrafted,
      spec_accepted_tokens: s.specAccepted,
      spec_acceptance_rate: s.specDrafted === 0 ? 0 : s.specAccepted / s.specDrafted,
      spec_tokens_per_verification: s.specVerifications === 0
        ? 0
        : s.specTokens / s.specVerifications,
    };
  }

  histograms(): { ttft: HistogramSnapshot; itl: HistogramSnapshot } {
    return { ttft: this.ttft.snapshot(), itl: this.itl.snapshot() };
  }
}
