import { type Config, type ModelSpec, NATIVE_NAMES, nativeConfig } from "../config/mod.ts";
import { errorMessage, NeuronError } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { HarnessError } from "./errors.ts";
import { ExternalHarness } from "./external.ts";
import type { Harness, HarnessContext, HarnessHealth, LoadProgress, ModelInfo } from "./harness.ts";
import { NativeHarness } from "./native/mod.ts";

/** Failures caused by the request itself: nothing was attempted, so nothing is recorded. */
const REQUEST_ERRORS = new Set([
  "unknown_harness",
  "path_not_allowed",
  "model_file_not_found",
  "model_file_invalid",
  "served_name_taken",
  "served_name_unsupported",
  "speculative_unsupported",
  "model_not_found",
  // the model_id or quant names nothing loadable (hub requests)
  "invalid_model_id",
  "unknown_source",
  "repo_not_found",
  "quant_not_found",
  "quant_required",
  "revision_not_found",
  "split_gguf_incomplete",
  "tensor_parallel_unavailable",
]);

/** Failed loads /models keeps, the oldest forgotten first. */
const MAX_FAILED = 16;

interface PendingLoad {
  harness: string;
  progress: number;
  promise: Promise<void>;
}

/**
 * The harnesses of this node, built from `[[harnesses]]`, and the bookkeeping that spans
 * them: which harness owns a model, one load attempt per model id at a time, and the
 * failures the gateway should see in /models.
 */
export class HarnessRegistry {
  readonly #harnesses: Harness[];
  readonly #loads = new Map<string, PendingLoad>();
  readonly #failed = new Map<string, ModelInfo>();

  constructor(harnesses: Harness[]) {
    this.#harnesses = harnesses;
  }

  static fromConfig(config: Config, ctx: HarnessContext): HarnessRegistry {
    return new HarnessRegistry(
      config.harnesses.map((entry) =>
        NATIVE_NAMES.includes(entry.name)
          ? new NativeHarness(entry.name, nativeConfig(config), ctx, config.cuda)
          : new ExternalHarness(entry, config.systemd.systemctl, ctx)
      ),
    );
  }

  /** Kicks off each harness's background start-up (external upstreams). */
  start(): void {
    for (const h of this.#harnesses) h.start();
  }

  names(): string[] {
    return this.#harnesses.map((h) => h.name);
  }

  /** The harness called `name`; `native` and `candle` name the same one. */
  get(name: string): Harness {
    const found = this.#harnesses.find((h) => h.name === name) ??
      (NATIVE_NAMES.includes(name) ? this.#harnesses.find((h) => h.kind === "native") : undefined);
    if (!found) {
      throw new HarnessError(
        "unknown_harness",
        `unknown harness "${name}" (this node has: ${this.names().join(", ")})`,
      );
    }
    return found;
  }

  /** Every model known here: what the harnesses hold, plus loads in progress or failed. */
  list(): ModelInfo[] {
    const out: ModelInfo[] = [];
    const seen = new Set<string>();
    for (const h of this.#harnesses) {
      for (const m of h.list()) {
        out.push(m);
        seen.add(m.id);
      }
    }
    for (const [id, load] of this.#loads) {
      if (seen.has(id)) continue;
      seen.add(id);
      out.push({
        id,
        harness: load.harness,
        status: "loading",
        devices: [],
        vram_used_mb: null,
        progress: load.progress,
      });
    }
    for (const [id, info] of this.#failed) if (!seen.has(id)) out.push(info);
    return out;
  }

  /** The model's entry when a harness holds it and it is loaded; `name` may be its served name. */
  loaded(name: string): ModelInfo | undefined {
    return this.list().find((m) =>
      (m.id === name || m.served_name === name) && m.status === "loaded"
    );
  }

  /** Whether `id` is being loaded now (its requests are told to retry, not that it is unknown). */
  loading(id: string): boolean {
    return this.#loads.has(id) || this.list().some((m) => m.id === id && m.status === "loading");
  }

  /** The harness that serves requests for `id`, if any. */
  find(id: string): Harness | undefined {
    return this.#harnesses.find((h) => h.has(id));
  }

  endpoint(id: string): string | null {
    return this.find(id)?.endpoint(id) ?? null;
  }

  /**
   * Loads `spec` on its harness. Concurrent loads of one id share one attempt; a model
   * already loaded is `already_loaded` (the gateway takes that as success).
   */
  load(spec: ModelSpec, onProgress?: (p: LoadProgress) => void): Promise<void> {
    const pending = this.#loads.get(spec.model_id);
    if (pending) return pending.promise;
    let harness: Harness;
    try {
      harness = this.get(spec.harness);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.loaded(spec.model_id)) {
      return Promise.reject(
        new HarnessError("already_loaded", `model ${spec.model_id} is already loaded`),
      );
    }
    const id = spec.model_id;
    const entry: PendingLoad = {
      harness: harness.name,
      progress: 0,
      promise: Promise.resolve(),
    };
    const started = Date.now();
    const mlog = log.child({ model: id, harness: harness.name });
    mlog.info("loading model");
    this.#failed.delete(id);
    entry.promise = harness.load(spec, (p) => {
      entry.progress = p.fraction;
      onProgress?.(p);
    }).then(
      () => {
        mlog.info("model loaded", { ms: Date.now() - started });
      },
      (err) => {
        mlog.warn("model load failed", { error: errorMessage(err) });
        if (err instanceof NeuronError && REQUEST_ERRORS.has(err.code)) throw err;
        if (this.#failed.size >= MAX_FAILED) {
          this.#failed.delete(this.#failed.keys().next().value!);
        }
        this.#failed.set(id, {
          id,
          harness: harness.name,
          status: "failed",
          devices: [],
          vram_used_mb: null,
          error: errorMessage(err),
          servable: { ok: false, reason: "load_failed", detail: errorMessage(err) },
        });
        throw err;
      },
    ).finally(() => {
      this.#loads.delete(id);
    });
    this.#loads.set(id, entry);
    return entry.promise;
  }

  /** Unloads `id` from the harness that holds it; a failed load's record is cleared. */
  async unload(id: string): Promise<void> {
    if (this.#loads.has(id)) {
      throw new HarnessError("model_loading", `model ${id} is still loading; unload it after`);
    }
    const owner = this.find(id);
    if (owner) {
      await owner.unload(id);
      log.info("model unloaded", { model: id, harness: owner.name });
      return;
    }
    if (this.#failed.delete(id)) return;
    throw new HarnessError("model_not_found", `model ${id} is not loaded`);
  }

  health(): HarnessHealth[] {
    return this.#harnesses.map((h) => h.health());
  }

  /** Releases every harness; failures are logged, never thrown (this runs at shutdown). */
  async close(): Promise<void> {
    await Promise.all(this.#harnesses.map(async (h) => {
      try {
        await h.close();
      } catch (err) {
        log.error("harness close failed", { harness: h.name, error: errorMessage(err) });
      }
    }));
  }
}
