/**
 * One rank's part of a tensor-parallel model: its slice of the weights on its backend and
 * the KV cache of its heads. The leader and every worker run the same code; only the
 * leader asks for logits.
 */

import type { Backend, KvCache, StepLayout } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/mod.ts";
import type { KvPoolSpec } from "../engine/runner.ts";
import { Qwen3Model } from "../models/qwen3.ts";
import type { Qwen3Shard } from "../models/qwen3_shard.ts";

const NO_ROWS = new Int32Array(0);

export class ShardRunner {
  private constructor(
    readonly model: Qwen3Model,
    readonly cache: KvCache,
    private readonly backend: Backend,
  ) {}

  /** Loads this rank's part of `file` onto `backend` (which the runner does not own). */
  static open(file: GgufFile, backend: Backend, shard: Qwen3Shard, kv: KvPoolSpec): ShardRunner {
    const model = Qwen3Model.load(file, backend, shard);
    try {
      const cache = backend.createKvCache({
        nLayers: model.hparams.nLayers,
        nKvHeads: model.local.nKvHeads,
        headDim: model.hparams.headDim,
        ...kv,
      });
      return new ShardRunner(model, cache, backend);
    } catch (err) {
      model.close();
      throw err;
    }
  }

  /** Runs one step; returns the logits of `logitRows` (none: the step only fills caches). */
  forward(ids: Int32Array, layout: StepLayout, logitRows: Int32Array = NO_ROWS): Float32Array {
    const logits = this.model.forward(ids, layout, this.cache, logitRows);
    if (logitRows.length > 0) return this.backend.read(logits);
    this.backend.synchronize?.();
    return new Float32Array(0);
  }

  close(): void {
    this.model.close();
  }
}
