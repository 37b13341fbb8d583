/**
 * One running request on the native engine, seen as the OpenAI layer's `Generation`: its
 * timing feeds the model's metrics, a request the node stopped ends with the node's
 * reason, and whatever way the request ends — finished, failed, cancelled by the client or
 * stopped by the node — its admission slot is released exactly once.
 */

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
  onError?: (code: string, message: string) => void;
}

/** Why the node stopped a request (shown to the client as an error). */
export interface StopReason {
  code: string;
  message: string;
}

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

  /** The node stops the request (unload, shutdown): the client gets `reason` as an error. */
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
        const out = this.#convert(e);
        if (e.type === "done") {
          metrics.promptTokens += e.usage.promptTokens;
          metrics.completionTokens += e.usage.completionTokens;
          outcome = e.finishReason === "cancelled" ? "cancelled" : "completed";
        }
        if (out) yield out;
      }
    } finally {
      this.#ctx.release();
      metrics.outcome(outcome);
      this.#ctx.onEnd(this);
    }
  }

  /** The event as the renderers see it: a cancellation the node asked for says why. */
  #convert(e: GenerationEvent): GenerationEvent | null {
    if (e.type === "error") this.#ctx.onError?.(e.code, e.message);
    if (e.type !== "done" || e.finishReason !== "cancelled") return e;
    // A client that cancelled is gone; a request the node stopped hears why.
    const r = this.#stopReason;
    return r ? { type: "error", code: r.code, message: r.message } : null;
  }
}
