/**
 * A model resident in the native engine: its engine host, admission queue and metrics,
 * and the requests it is serving (so an unload can stop them cleanly first).
 *
 * A tensor-parallel model whose group broke (a worker died, missed a deadline) fails its
 * requests with `tp_worker_failed`; the first such failure turns the model `recovering`:
 * its engine is closed (reaping the workers) and started again from scratch, then the
 * model is `loaded` again — or `failed`, saying why. New requests meanwhile get a 503
 * with Retry-After; queued ones wait for the new engine.
 */

import { errorMessage, NeuronError } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { EngineStats } from "../../engine/mod.ts";
import type { ModelHost } from "./model_host.ts";
import { HarnessError } from "../errors.ts";
import type { InferenceCall, ModelInfo, ModelStats, ModelStatus } from "../harness.ts";
import { Admission, AdmissionError, type AdmissionLimits } from "./admission.ts";
import { NativeGeneration, type StopReason } from "./generation.ts";
import { ModelMetrics } from "./model_metrics.ts";
import { planCall, type PoolPlan } from "./plan.ts";

const MIB = 1024 * 1024;
const STATS_EVERY_MS = 1000;
const GPU_DEVICES = new Set(["cuda"]);
/** The engine error that means a tensor-parallel group broke and must be rebuilt. */
const GROUP_BROKEN = "tp_worker_failed";
const RECOVERY_RETRY_AFTER_SECS = 5;

/** Starts a fresh engine for the same model (a recovery's reload). */
export type EngineRestart = () => Promise<ModelHost>;

/** Context lengths whose KV pool size /models reports (Qwen3's native 32k, YaRN's 128k). */
const KV_REPORT_CONTEXTS = [32768, 131072];

export class LoadedModel {
  readonly id: string;
  readonly devices: number[];
  readonly admission: Admission;
  readonly metrics = new ModelMetrics();
  readonly #harness: string;
  readonly #active = new Set<NativeGeneration>();
  /** Stops each pooling request in flight, saying why (unload, shutdown). */
  readonly #pools = new Set<(reason: StopReason) => void>();
  readonly #restart: EngineRestart | null;
  readonly #servedName: string | undefined;
  #host: ModelHost;
  #recovery: Promise<void> | null = null;
  #failure: string | null = null;
  #closed = false;
  #statsTimer: ReturnType<typeof setInterval> | undefined;

  constructor(
    id: string,
    harness: string,
    host: ModelHost,
    limits: AdmissionLimits,
    devices: number[],
    options: { restart?: EngineRestart | null; servedName?: string } = {},
  ) {
    this.id = id;
    this.#harness = harness;
    this.#host = host;
    this.#restart = options.restart ?? null;
    this.#servedName = options.servedName;
    this.admission = new Admission(limits);
    this.devices = GPU_DEVICES.has(host.description.device) ? devices : [];
  }

  get host(): ModelHost {
    return this.#host;
  }

  get status(): ModelStatus {
    if (this.#recovery) return "recovering";
    return this.#failure === null && this.#host.alive ? "loaded" : "failed";
  }

  get onGpu(): boolean {
    return GPU_DEVICES.has(this.host.description.device);
  }

  info(): ModelInfo {
    const d = this.host.description;
    const bytes = d.weightBytes + d.kvBytes;
    const onDevice = d.deviceBytes > 0 ? d.deviceBytes : bytes;
    const status = this.status;
    return {
      id: this.id,
      ...(this.#servedName ? { served_name: this.#servedName } : {}),
      harness: this.#harness,
      status,
      devices: this.devices,
      vram_used_mb: this.onGpu ? Math.round(onDevice / MIB) : null,
      capabilities: [d.kind],
      limit: { context: d.contextLength, output: d.contextLength },
      tool_call: d.hasToolCalls,
      reasoning: d.hasReasoning,
      quantization: d.quantization,
      memory_bytes: bytes,
      kv_cache: {
        type: d.kv.type,
        bytes: d.kvBytes,
        positions: d.kv.positions,
        bytes_per_position: d.kv.bytesPerPosition,
        context_bytes: Object.fromEntries(
          KV_REPORT_CONTEXTS.map((n) => [String(n), n * d.kv.bytesPerPosition]),
        ),
      },
      ...this.#unservable(status),
    };
  }

  /** Why the gateway should route around this model, when it should. */
  #unservable(status: ModelStatus): Partial<ModelInfo> {
    if (status === "recovering") {
      const detail = "a tensor-parallel worker failed; the model is being reloaded";
      return { servable: { ok: false, reason: "recovering", detail } };
    }
    if (this.#failure !== null) {
      const detail = this.#failure;
      return { error: detail, servable: { ok: false, reason: "recovery_failed", detail } };
    }
    if (status === "failed") {
      return {
        servable: { ok: false, reason: "engine_crashed", detail: "the engine worker stopped" },
      };
    }
    return {};
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
    this.#refuseWhileRecovering();
    const plan = planCall(call, this.host.description);
    let release;
    try {
      release = await this.admission.acquire(call.signal);
    } catch (err) {
      if (err instanceof AdmissionError) this.metrics.outcome("rejected");
      throw err;
    }
    // Queued before a group broke: wait for the new engine rather than the dead one.
    if (this.#recovery) await this.#recovery;
    this.#watchStats();
    if (plan.kind === "pool") return await this.#pool(plan, call, release);
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
      onError: (fault) => {
        if (fault.code === GROUP_BROKEN) this.#recover(fault.message);
      },
    });
    this.#active.add(gen);
    call.signal.addEventListener("abort", onAbort, { once: true });
    if (call.signal.aborted) onAbort();
    return await plan.render(gen);
  }

  /**
   * Runs a pooling request (embeddings, rerank) under its admission slot: its inputs are
   * batched by the engine, and a client that leaves cancels them.
   */
  async #pool(plan: PoolPlan, call: InferenceCall, release: () => void): Promise<Response> {
    const stop = new AbortController();
    const state: { stopped: StopReason | null } = { stopped: null };
    const onStop = (reason: StopReason): void => {
      state.stopped = reason;
      stop.abort();
    };
    this.#pools.add(onStop);
    try {
      const result = await this.host.pool(
        { id: crypto.randomUUID(), inputs: plan.inputs },
        AbortSignal.any([call.signal, stop.signal]),
      );
      this.metrics.promptTokens += result.promptTokens;
      this.metrics.outcome("completed");
      return plan.render(result);
    } catch (err) {
      const reason = state.stopped;
      this.metrics.outcome(call.signal.aborted || reason !== null ? "cancelled" : "failed");
      if (err instanceof NeuronError && err.code === GROUP_BROKEN) this.#recover(err.message);
      // The node stopped it (unload, shutdown): the client hears why.
      if (reason !== null) throw new NeuronError(reason.code, reason.message);
      throw err;
    } finally {
      this.#pools.delete(onStop);
      release();
      this.#readStats();
    }
  }

  /** Stops every request (they end with `reason`), refuses the queue, frees the engine. */
  async close(reason: StopReason): Promise<void> {
    this.#closed = true;
    clearInterval(this.#statsTimer);
    this.#statsTimer = undefined;
    // Queued requests hear why the model went away (model_unloaded, shutting_down).
    this.admission.rejectWaiting(new NeuronError(reason.code, reason.message));
    for (const g of this.#active) g.stop(reason);
    for (const stop of this.#pools) stop(reason);
    if (this.#recovery) await this.#recovery;
    await this.host.close();
  }

  #refuseWhileRecovering(): void {
    if (!this.#recovery) return;
    throw new HarnessError(
      "harness_unavailable",
      `model ${this.id} is being reloaded after a tensor-parallel worker failed; retry shortly`,
      { retryAfter: RECOVERY_RETRY_AFTER_SECS },
    );
  }

  /** Unload + reload after the engine reported a broken tensor-parallel group. */
  #recover(reason: string): void {
    if (this.#recovery || this.#closed || this.#restart === null || this.#failure !== null) return;
    const restart = this.#restart;
    const mlog = log.child({ model: this.id });
    mlog.warn("model recovering: reloading its engine", { reason });
    this.#recovery = (async () => {
      try {
        await this.#host.close();
        if (this.#closed) return;
        this.#host = await restart();
        mlog.info("model recovered");
      } catch (err) {
        this.#failure = `recovery failed: ${errorMessage(err)}`;
        mlog.error("model recovery failed", { error: errorMessage(err) });
      } finally {
        this.#recovery = null;
      }
    })();
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
