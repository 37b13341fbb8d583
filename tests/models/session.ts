/**
 * A model instance on a backend, driven one step at a time as the engine drives it (one
 * sequence, a block table in order): what the model tests compare with llama.cpp.
 */

import type { Backend, KvDType } from "../../src/backend/backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { readModel } from "../../src/models/registry.ts";
import { overrideRopeScaling, type RopeScalingConfig } from "../../src/models/rope_scaling.ts";

const BLOCK = 16;
const MAX_TOKENS = 1024;

/** The KV cache a session runs on (its type, the positions it holds), and rope scaling. */
export interface SessionOptions {
  dtype?: KvDType;
  maxTokens?: number;
  ropeScaling?: RopeScalingConfig;
}

export class StepSession {
  readonly table: Int32Array;

  constructor(readonly instance: ModelInstance, readonly vocab: number, blocks: number) {
    this.table = Int32Array.from({ length: blocks }, (_, i) => i);
  }

  /** Runs `ids` at positions start.. and returns the logits of the rows in `logitRows`. */
  run(ids: ArrayLike<number>, start: number, logitRows: number[]): Float32Array {
    return this.instance.forward({
      ids: Int32Array.from(ids),
      layout: {
        positions: Int32Array.from({ length: ids.length }, (_, i) => start + i),
        sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: this.table }],
      },
      logitRows: Int32Array.from(logitRows),
    })!;
  }

  /** The prompt in one step, then `steps - 1` greedy tokens one per step: the logits of each. */
  greedy(prompt: readonly number[], steps: number): { ids: number[]; logits: Float32Array[] } {
    const logits = [this.run(prompt, 0, [prompt.length - 1])];
    const ids = [argmax(logits[0])];
    for (let k = 1; k < steps; k++) {
      logits.push(this.run([ids[k - 1]], prompt.length + k - 1, [0]));
      ids.push(argmax(logits[k]));
    }
    return { ids, logits };
  }
}

/**
 * Runs `fn` on the model of `path` bound to `backend` (closed afterwards, with the backend),
 * on an f16 cache of 1024 positions unless `options` say otherwise, with its rope scaling
 * in place of the file's own when given.
 */
export function withSession<T>(
  path: string,
  backend: Backend,
  fn: (s: StepSession) => T,
  options: SessionOptions = {},
): T {
  const file = openGguf(path);
  if (options.ropeScaling) overrideRopeScaling(file, options.ropeScaling);
  const model = readModel(file);
  const nBlocks = Math.ceil((options.maxTokens ?? MAX_TOKENS) / BLOCK);
  const instance = ModelInstance.create(model, backend, {
    blockSize: BLOCK,
    nBlocks,
    dtype: options.dtype ?? "f16",
  });
  try {
    return fn(new StepSession(instance, model.shape.vocabSize, nBlocks));
  } finally {
    instance.close();
    backend.close();
    file.close();
  }
}
