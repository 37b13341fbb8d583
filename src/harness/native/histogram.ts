import type { HistogramSnapshot } from "../harness.ts";

/** A latency histogram with fixed buckets (seconds), read as cumulative counts. */
export class Histogram {
  readonly #buckets: readonly number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(buckets: readonly number[]) {
    this.#buckets = buckets;
    this.#counts = buckets.map(() => 0);
  }

  observe(seconds: number): void {
    for (let i = 0; i < this.#buckets.length; i++) {
      if (seconds <= this.#buckets[i]) this.#counts[i]++;
    }
    this.#sum += seconds;
    this.#count++;
  }

  snapshot(): HistogramSnapshot {
    return {
      buckets: [...this.#buckets],
      counts: [...this.#counts],
      sum: this.#sum,
      count: this.#count,
    };
  }
}

/** Time to first token: from the request's arrival to its first generated token. */
export const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Inter-token latency: between consecutive tokens of one request. */
export const ITL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
