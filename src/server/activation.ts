import type { ModelSpec } from "../config/mod.ts";
import { errorMessage } from "../common/errors.ts";
import { HarnessError, type HarnessRegistry } from "../harness/mod.ts";

/** `/health.activation` (WIRE.md). */
export interface ActivationReport {
  state: "pre_warming" | "ready";
  pending: string[];
  in_progress: string | null;
  completed: string[];
  failed: { model_id: string; error: string }[];
}

/**
 * Loads `[[default_models]]` one after another in the background once the node listens,
 * so the node answers the gateway while weights are still arriving.
 */
export class Activation {
  readonly #specs: ModelSpec[];
  readonly #report: ActivationReport;

  constructor(specs: ModelSpec[]) {
    this.#specs = specs;
    this.#report = {
      state: specs.length ? "pre_warming" : "ready",
      pending: specs.map((s) => s.model_id),
      in_progress: null,
      completed: [],
      failed: [],
    };
  }

  report(): ActivationReport {
    const r = this.#report;
    return { ...r, pending: [...r.pending], completed: [...r.completed], failed: [...r.failed] };
  }

  /** Resolves when every default model was tried; stops early when `signal` fires. */
  async run(registry: HarnessRegistry, signal: AbortSignal): Promise<void> {
    const r = this.#report;
    for (const spec of this.#specs) {
      if (signal.aborted) break;
      r.pending.shift();
      r.in_progress = spec.model_id;
      try {
        await registry.load(spec);
        r.completed.push(spec.model_id);
      } catch (err) {
        if (err instanceof HarnessError && err.code === "already_loaded") {
          r.completed.push(spec.model_id);
        } else {
          r.failed.push({ model_id: spec.model_id, error: errorMessage(err) });
        }
      }
      r.in_progress = null;
    }
    r.state = "ready";
  }
}
