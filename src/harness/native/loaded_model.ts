/**
 * A model resident in the native engine: its engine host, admission queue and metrics,
 * and the requests it is serving (so an unload can stop them cleanly first).
 */

import { errorMessage } from "../../common/errors.ts";
import type { EngineHost, EngineStats } from "../../engine/mod.ts";
import type { InferenceCall, ModelInfo, ModelStats } from "../harness.ts";
import { Admission, AdmissionError, type AdmissionLimits } from "./admission.ts";
import { NativeGeneration, type StopReason } from "./generation.ts";
import { ModelMetrics } from "./model_metrics.ts";
import { planCall } from "./plan.ts";

const MIB = 1024 * 1024;
const STATS_EVERY_MS = 1000;
const GPU_DEVICES = new Set(["cuda"]);

export class LoadedModel {
  readonly id: string;
  readonly host: EngineHost;
  readonly devices: number[];
  readonly admission: Admission;
  readonly metrics = new ModelMetrics();
  readonly #harness: string;
  readonly #active = new Set<NativeGeneration>();
  #statsTimer: ReturnType<typeof setInterval> | undefined;

  constructor(
    id: string,
    harness: string,
    host: EngineHost,
    limits: AdmissionLimits,
    devices: number[],
  ) {
    this.id = id;
    this.#harness = harness;
    this.host = host;
    this.admission = new Admission(limits);
    this.devices = GPU_DEVICES.has(host.description.device) ? devices : [];
  }

  get onGpu(): boolean {
    return GPU_DEVICES.has(this.host.description.device);
  }

  info(): ModelInfo {
    const d = this.host.description;
    const bytes = d.weightBytes + d.kvBytes;
    return {
      id: this.id,
      harness: this.#harness,
      status: this.host.alive ? "loaded" : "failed",
      devices: this.devices,
      vram_used_mb: this.onGpu ? Math.round(bytes / MIB) : null,
      capabilities: ["text"],
      limit: { context: d.contextLength, output: d.contextLength },
      tool_call: d.hasToolCalls,
      reasoning: d.hasReasoning,
      quantization: d.quantization,
      memory_bytes: bytes,
      ...(this.host.alive ? {} : {
        servable: { ok: false, reason: "engine_crashed", detail: "the engine worker stopped" },
      }),
    };
  }

  stats(): ModelStats {
    const m = this.metrics;
    const h = m.histograms();
    return {
      id: this.id,
      in_flight: this.admission.inFlight,
      queue_depth: this.admission.queueDepth,
      tok_s_prefill: m.tokSPrefill,
      tok_s_decode: m.tokSDecode,
      prompt_tokens_total: m.promptTokens,
      completion_tokens_total: m.completionTokens,
      requests_total: { ...m.outcomes },
      time_to_first_token_seconds: h.ttft,
      inter_token_latency_seconds: h.itl,
      scheduler: m.scheduler(),
    };
  }

  async serve(call: InferenceCall): Promise<Response> {
    const arrivedAt = performance.now();
    const plan = planCall(call, this.host.description);
    let release;
    try {
      release = await this.admission.acquire(call.signal);
    } catch (err) {
      if (err instanceof AdmissionError) this.metrics.outcome("rejected");
      throw err;
    }
    this.#watchStats();
    let stream;
    try {
      stream = await this.host.generate({ id: crypto.randomUUID(), ...plan.request });
    } catch (err) {
      release();
      this.metrics.outcome("failed");
      throw err;
    }
    // A client that left hears nothing; a node that gives up on the request (shutdown)
    // ends it with the reason.
    const onAbort = (): void =>
      gen.stop({ code: "request_cancelled", message: errorMessage(call.signal.reason) });
    const gen = new NativeGeneration(stream, {
      arrivedAt,
      metrics: this.metrics,
      release,
      onEnd: (g) => {
        this.#active.delete(g);
        call.signal.removeEventListener("abort", onAbort);
        this.#readStats();
      },
    });
    this.#active.add(gen);
    call.signal.addEventListener("abort", onAbort, { once: true });
    if (call.signal.aborted) onAbort();
    return await plan.render(gen);
  }

  /** Stops every request (they end with `reason`), refuses the queue, frees the engine. */
  async close(reason: StopReason): Promise<void> {
    clearInterval(this.#statsTimer);
    this.#statsTimer = undefined;
    this.admission.rejectWaiting(new AdmissionError(reason.message, 5));
    for (const g of this.#active) g.stop(reason);
    await this.host.close();
  }

  /** Reads the engine's counters every second while requests run. */
  #watchStats(): void {
    this.#statsTimer ??= setInterval(() => {
      this.#readStats();
      if (this.admission.inFlight === 0 && this.admission.queueDepth === 0) {
        clearInterval(this.#statsTimer);
        this.#statsTimer = undefined;
      }
    }, STATS_EVERY_MS);
  }

  #readStats(): void {
    if (!this.host.alive) return;
    this.host.stats().then(
      (s: EngineStats) => this.metrics.engineStats(s),
      () => {},
    );
  }
}
