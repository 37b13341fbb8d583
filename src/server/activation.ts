import type { ModelSpec } from "../config/mod.ts";
import { errorMessage, NeuronError } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { HarnessError, type HarnessRegistry, type LoadProgress } from "../harness/mod.ts";
import { RETRYABLE_HUB_CODES } from "../hub/mod.ts";

/** What a default model's load is doing, while it runs. */
export interface ActivationProgress {
  model_id: string;
  /** 0..1 */
  fraction: number;
  stage: string;
  /** Which attempt this is (retries follow network failures). */
  attempt: number;
  downloaded_bytes?: number;
  total_bytes?: number;
  bytes_per_sec?: number;
  eta_secs?: number | null;
}

/** `/health.activation` (WIRE.md), plus the running load's progress. */
export interface ActivationReport {
  state: "pre_warming" | "ready";
  pending: string[];
  in_progress: string | null;
  completed: string[];
  failed: { model_id: string; error: string }[];
  progress: ActivationProgress | null;
}

export interface RetryPolicy {
  /** Tries per model, the first included. */
  attempts: number;
  /** Wait before the first retry; doubled each time up to `maxDelayMs`. */
  firstDelayMs: number;
  maxDelayMs: number;
}

/** Network trouble at boot (no route yet, the hub briefly down) deserves patience. */
export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, firstDelayMs: 2_000, maxDelayMs: 60_000 };

/**
 * Failures that may pass by themselves (the network, a busy hub, storage refusing a signed
 * URL); anything else (404, bad file) will not.
 */
const RETRYABLE = new Set([...RETRYABLE_HUB_CODES, "harness_unavailable"]);

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Loads `[[default_models]]` one after another in the background once the node listens,
 * so the node answers the gateway while weights are still arriving. Network failures are
 * retried with exponential backoff; other failures are final.
 */
export class Activation {
  readonly #specs: ModelSpec[];
  readonly #report: ActivationReport;
  readonly #retry: RetryPolicy;

  constructor(specs: ModelSpec[], retry: RetryPolicy = DEFAULT_RETRY) {
    this.#specs = specs;
    this.#retry = retry;
    this.#report = {
      state: specs.length ? "pre_warming" : "ready",
      pending: specs.map((s) => s.model_id),
      in_progress: null,
      completed: [],
      failed: [],
      progress: null,
    };
  }

  /** Whether `name` (a model id or served name) is a default model still to be loaded. */
  waitingFor(name: string): boolean {
    const r = this.#report;
    return this.#specs.some((s) =>
      (s.model_id === name || s.served_name === name) &&
      (s.model_id === r.in_progress || r.pending.includes(s.model_id))
    );
  }

  report(): ActivationReport {
    const r = this.#report;
    return {
      ...r,
      pending: [...r.pending],
      completed: [...r.completed],
      failed: [...r.failed],
      progress: r.progress ? { ...r.progress } : null,
    };
  }

  /** Resolves when every default model was tried; stops early when `signal` fires. */
  async run(registry: HarnessRegistry, signal: AbortSignal): Promise<void> {
    const r = this.#report;
    for (const spec of this.#specs) {
      if (signal.aborted) break;
      r.pending.shift();
      r.in_progress = spec.model_id;
      const error = await this.#loadWithRetries(registry, spec, signal);
      if (error === null) r.completed.push(spec.model_id);
      else r.failed.push({ model_id: spec.model_id, error });
      r.in_progress = null;
      r.progress = null;
    }
    r.state = "ready";
  }

  /** null when loaded, else why not. */
  async #loadWithRetries(
    registry: HarnessRegistry,
    spec: ModelSpec,
    signal: AbortSignal,
  ): Promise<string | null> {
    const r = this.#report;
    let delay = this.#retry.firstDelayMs;
    for (let attempt = 1;; attempt++) {
      r.progress = { model_id: spec.model_id, fraction: 0, stage: "starting", attempt };
      try {
        await registry.load(spec, (p: LoadProgress) => {
          r.progress = { model_id: spec.model_id, fraction: p.fraction, stage: p.stage, attempt };
          const d = p.detail;
          if (d?.total_bytes !== undefined) {
            Object.assign(r.progress, {
              downloaded_bytes: d.downloaded_bytes,
              total_bytes: d.total_bytes,
              bytes_per_sec: d.bytes_per_sec,
              eta_secs: d.eta_secs,
            });
          }
        });
        return null;
      } catch (err) {
        if (err instanceof HarnessError && err.code === "already_loaded") return null;
        const retryable = err instanceof NeuronError && RETRYABLE.has(err.code);
        if (!retryable || attempt >= this.#retry.attempts || signal.aborted) {
          return errorMessage(err);
        }
        // A hub that said how long to wait (429 Retry-After) is not asked sooner.
        const asked = (err as { retryAfter?: unknown }).retryAfter;
        const wait = typeof asked === "number" ? Math.max(delay, asked * 1000) : delay;
        log.warn("default model load failed; retrying", {
          model: spec.model_id,
          attempt,
          retry_in_ms: wait,
          error: errorMessage(err),
        });
        r.progress = { model_id: spec.model_id, fraction: 0, stage: "waiting to retry", attempt };
        await sleep(wait, signal);
        if (signal.aborted) return errorMessage(err);
        delay = Math.min(delay * 2, this.#retry.maxDelayMs);
      }
    }
  }
}
