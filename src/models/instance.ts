/**
 * A model bound to a backend, with its KV cache: what a runner on one device runs, and so
 * does every rank of a tensor-parallel group. A step's logits come back whole, or as each
 * row's argmax only.
 */

import type { Backend, KvCache, KvPoolSpec, Step, StepInterrupt } from "../backend/backend.ts";
import type { GgufModel, Model, ModelShard } from "./family.ts";

export class ModelInstance {
  private constructor(
    readonly model: Model,
    readonly cache: KvCache,
    private readonly backend: Backend,
  ) {}

  /** Loads `gguf` (this rank's part of it under `shard`) onto `backend`, which it does not own. */
  static create(
    gguf: GgufModel,
    backend: Backend,
    kv: KvPoolSpec,
    shard?: ModelShard,
  ): ModelInstance {
    const model = gguf.load(backend, shard);
    try {
      return new ModelInstance(model, backend.createKvCache({ ...model.kvShape, ...kv }), backend);
    } catch (err) {
      model.close();
      throw err;
    }
  }

  /** Bytes of the KV cache. */
  get kvBytes(): number {
    return this.cache.bytes;
  }

  /**
   * Runs one step; returns `step.logitRows.length` rows of logits (none: the step only
   * fills the cache). A backend that can stop between ops stops when `interrupt` fires and
   * null comes back: the step's work (its cache rows included) is then left half done, to
   * be run again. With `into` the rows are read into it (Backend.read).
   */
  forward(step: Step, interrupt?: StepInterrupt, into?: Float32Array): Float32Array | null {
    const logits = this.model.forward(step, this.cache);
    if (!this.backend.synchronize(interrupt)) return null;
    return step.logitRows.length > 0 ? this.backend.read(logits, into) : new Float32Array(0);
  }

  /**
   * `forward`, returning only each logit row's argmax, computed where the logits are; a row
   * with a mask (structured output) picks among the tokens it allows.
   */
  forwardArgmax(
    step: Step,
    interrupt?: StepInterrupt,
    masks?: readonly (Uint32Array | null)[],
  ): Int32Array | null {
    const logits = this.model.forward(step, this.cache);
    // Unless the step may be stopped midway, its argmax runs with it, in one call where
    // the backend queues ops (the CPU's op list).
    if (interrupt !== undefined && !this.backend.synchronize(interrupt)) return null;
    if (step.logitRows.length > 0) return this.backend.argmaxRows(logits, masks);
    this.backend.synchronize();
    return new Int32Array(0);
  }

  /** Copies positions [0, rows) of cache block `from` into block `to`. */
  copyKvRows(from: number, to: number, rows: number): void {
    this.backend.copyKvRows(this.cache, from, to, rows);
  }

  /** Frees the model's scratch memory; the backend keeps its weights until it closes. */
  close(): void {
    this.model.close();
  }
}
