/**
 * One running request on the native engine, seen as the OpenAI layer's `Generation`: its
 * timing feeds the model's metrics, a request the node stopped ends `cancelled` with the
 * node's reason, and whatever way the request ends — finished, failed, cancelled by the
 * client or stopped by the node — its admission slot is released exactly once.
 */

import type { GenerationFault } from "../../frontend/mod.ts";
import type { Generation, GenerationEvent } from "../../openai/mod.ts";
import type { GenerationStream } from "./model_host.ts";
import type { Release } from "./admission.ts";
import type { ModelMetrics, Outcome } from "./model_metrics.ts";

export interface GenerationContext {
  /** performance.now() when the request arrived. */
  arrivedAt: number;
  metrics: ModelMetrics;
  release: Release;
  /** Called once, after the last event. */
  onEnd: (gen: NativeGeneration) => void;
  /** Called when the engine ends the request with an error (e.g. a broken model). */
  onError?: (fault: GenerationFault) => void;
}

/** Why the node stopped a request (unload, shutdown), told to its client. */
export type StopReason = GenerationFault;

export class NativeGeneration implements Generation {
  readonly promptTokens: number;
  readonly events: AsyncIterable<GenerationEvent>;
  readonly #stream: GenerationStream;
  readonly #ctx: GenerationContext;
  #stopReason: StopReason | null = null;

  constructor(stream: GenerationStream, ctx: GenerationContext) {
    this.#stream = stream;
    this.#ctx = ctx;
    this.promptTokens = stream.promptTokens;
    this.events = this.#run();
  }

  /** The client went away: stop quietly. */
  cancel(): void {
    this.#stream.cancel();
  }

  /** The node stops the request (unload, shutdown): it ends `cancelled`, saying `reason`. */
  stop(reason: StopReason): void {
    this.#stopReason ??= reason;
    this.#stream.cancel();
  }

  async *#run(): AsyncGenerator<GenerationEvent> {
    const { metrics } = this.#ctx;
    let outcome: Outcome = "failed";
    let lastTokenAt: number | null = null;
    try {
      for await (const e of this.#stream) {
        if (e.type === "delta" && e.tokens.length > 0) {
          const now = performance.now();
          if (lastTokenAt === null) {
            metrics.ttft.observe((now - this.#ctx.arrivedAt) / 1000);
          } else {
            const each = (now - lastTokenAt) / 1000 / e.tokens.length;
            for (let i = 0; i < e.tokens.length; i++) metrics.itl.observe(each);
          }
          lastTokenAt = now;
        }
        const out = this.#withReason(e);
        if (e.type === "done") {
          metrics.promptTokens += e.usage.promptTokens;
          metrics.completionTokens += e.usage.completionTokens;
          outcome = e.finishReason === "cancelled"
            ? "cancelled"
            : e.finishReason === "error"
            ? "failed"
            : "completed";
          if (e.fault && e.finishReason === "error") this.#ctx.onError?.(e.fault);
        }
        yield out;
      }
    } finally {
      this.#ctx.release();
      metrics.outcome(outcome);
      this.#ctx.onEnd(this);
    }
  }

  /** A cancellation the node asked for carries its reason. */
  #withReason(e: GenerationEvent): GenerationEvent {
    const reason = this.#stopReason;
    if (e.type !== "done" || e.finishReason !== "cancelled" || reason === null) return e;
    return { ...e, fault: reason };
  }
}
