/**
 * Opening a model: its GGUF file read once (the family chosen by `general.architecture`,
 * models/registry.ts), then a runner for it: on one device in this thread, or split over
 * tensor-parallel ranks (tp/).
 */

import type { KvPoolSpec } from "../backend/backend.ts";
import { openGguf } from "../gguf/mod.ts";
import type { GgufModel } from "../models/family.ts";
import { readModel } from "../models/registry.ts";
import { overrideRopeScaling, type RopeScalingConfig } from "../models/rope_scaling.ts";
import { TpRunner } from "../tp/mod.ts";
import { LocalRunner, type LocalRunnerOptions } from "./local_runner.ts";
import type { ModelRunner } from "./runner.ts";

export type { ModelRunner } from "./runner.ts";
export { LocalRunner, type LocalRunnerOptions } from "./local_runner.ts";

export interface RunnerOptions extends Omit<LocalRunnerOptions, "cudaDevice"> {
  /** Ranks the model is split over (tensor parallelism); 1 or absent: this thread alone. */
  tensorParallel?: number;
  /** The CUDA device of each rank (default 0..N-1). */
  devices?: number[];
  /** Rope scaling asked for at load (openModel's), for the ranks to apply too. */
  ropeScaling?: RopeScalingConfig;
}

/**
 * Reads the model file at `path` once: mapped whole, in file order (gguf/source.ts says
 * why), its family's hyperparameters read and checked, with `ropeScaling` in place of the
 * file's own.
 */
export function openModel(path: string, ropeScaling?: RopeScalingConfig): GgufModel {
  const file = openGguf(path, { populate: true });
  try {
    if (ropeScaling) overrideRopeScaling(file, ropeScaling);
    return readModel(file);
  } catch (err) {
    file.close();
    throw err;
  }
}

/**
 * The runner for `model` under `options`: on one device in this thread, or split over
 * `tensorParallel` ranks with this thread as rank 0. The model file stays the caller's.
 */
export function openRunner(model: GgufModel, options: RunnerOptions, kv: KvPoolSpec): ModelRunner {
  const tensorParallel = options.tensorParallel ?? 1;
  if (tensorParallel > 1) return TpRunner.open(model, { ...options, tensorParallel }, kv);
  return LocalRunner.open(model, { ...options, cudaDevice: options.devices?.[0] }, kv);
}
