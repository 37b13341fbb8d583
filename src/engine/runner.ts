/**
 * What the engine needs from a model, whatever runs it: one step of tokens in, logits of
 * the rows that are sampled out. `LocalRunner` runs the model on a backend in this thread;
 * a tensor-parallel runner fans the same step out to ranks in other processes. The engine
 * only decides *what* runs each step (scheduling, cache blocks, sampling).
 */

import {
  type Backend,
  type KvCache,
  type KvCacheSpec,
  type KvDType,
  kvRowBytes,
  type StepInterrupt,
  type StepLayout,
} from "../backend/backend.ts";
import { createBackend, type DeviceChoice } from "../backend/mod.ts";
import type { GgufFile } from "../gguf/mod.ts";
import { type Qwen3Hparams, Qwen3Model, readQwen3Hparams } from "../models/qwen3.ts";
import { TpRunner } from "../tp/mod.ts";

export interface StepBatch {
  ids: Int32Array;
  layout: StepLayout;
  /** Rows whose logits are returned, in this order. */
  logitRows: Int32Array;
}

/** How the KV cache pool is laid out; its per-layer shape comes from the model. */
export interface KvPoolSpec {
  blockSize: number;
  nBlocks: number;
  dtype: KvDType;
}

export interface ModelRunner {
  readonly hparams: Qwen3Hparams;
  /** The backend kind ("cpu", "cuda", ...). */
  readonly device: string;
  /** Bytes of the KV cache pool. */
  readonly kvBytes: number;
  /**
   * Runs one step; returns `logitRows.length` rows of `vocabSize` logits. A runner whose
   * backend can stop between ops stops when `interrupt` fires and returns null: the step's
   * work (its cache rows included) is then left half done, to be run again.
   */
  forward(batch: StepBatch): Float32Array;
  forward(batch: StepBatch, interrupt: StepInterrupt | undefined): Float32Array | null;
  /**
   * Runs one step and returns only each logit row's argmax, where the runner can compute it
   * without copying logits back (a GPU); absent otherwise. Null as for `forward`.
   */
  forwardArgmax?(batch: StepBatch, interrupt?: StepInterrupt): Int32Array | null;
  /** Copies positions [0, rows) of cache block `from` into `to` (Backend.copyKvRows);
   * absent where the backend cannot. */
  copyKvRows?(from: number, to: number, rows: number): void;
  /** Bytes held on the device (weights, cache, scratch), for device-resident runners. */
  deviceBytes?(): number;
  close(): void;
}

export interface LocalRunnerOptions {
  device: DeviceChoice;
  threads: number;
  /** CPU: weights read in place from the mmapped file (default) or copied (false). */
  mmap?: boolean;
  /** Where the CUDA libraries are ([cuda] of neuron.toml). */
  cuda?: { libcuda?: string; libcublas?: string };
  /** Ranks the model is split over (tensor parallelism); 1 or absent: this thread alone. */
  tensorParallel?: number;
  /** The CUDA device of each rank. */
  devices?: number[];
}

export class LocalRunner implements ModelRunner {
  readonly hparams: Qwen3Hparams;
  readonly forwardArgmax?: (batch: StepBatch, interrupt?: StepInterrupt) => Int32Array | null;
  readonly copyKvRows?: (from: number, to: number, rows: number) => void;

  private constructor(
    private readonly backend: Backend,
    private readonly model: Qwen3Model,
    private readonly cache: KvCache,
  ) {
    this.hparams = model.hparams;
    const copy = backend.copyKvRows?.bind(backend);
    if (copy !== undefined) this.copyKvRows = (from, to, rows) => copy(cache, from, to, rows);
    const argmaxRows = backend.argmaxRows?.bind(backend);
    if (argmaxRows !== undefined) {
      this.forwardArgmax = (batch, interrupt) => {
        const logits = model.forward(batch.ids, batch.layout, cache, batch.logitRows);
        // Unless the step may be stopped midway, its argmax runs with it, in one call where
        // the backend queues ops (the CPU's op list).
        if (interrupt !== undefined && !this.#ran(interrupt)) return null;
        if (batch.logitRows.length > 0) return argmaxRows(logits);
        this.#ran();
        return new Int32Array(0);
      };
    }
  }

  /** Binds the model in `file` to a new backend with a KV pool of `kv`. */
  static open(file: GgufFile, options: LocalRunnerOptions, kv: KvPoolSpec): LocalRunner {
    const backend = createBackend(options.device, {
      threads: options.threads,
      mmap: options.mmap,
      cuda: { ...options.cuda, device: options.devices?.[0] ?? 0 },
    });
    try {
      const hp = readQwen3Hparams(file);
      const kvSpec = {
        nLayers: hp.nLayers,
        nKvHeads: hp.nKvHeads,
        headDim: hp.headDim,
        ...kv,
      };
      backend.ensureFits?.(weightBytes(file) + kvBytes(kvSpec), "the model and its KV cache");
      const model = Qwen3Model.load(file, backend);
      return new LocalRunner(backend, model, backend.createKvCache(kvSpec));
    } catch (err) {
      backend.close();
      throw err;
    }
  }

  get device(): string {
    return this.backend.kind;
  }

  get kvBytes(): number {
    return this.cache.bytes;
  }

  forward(batch: StepBatch): Float32Array;
  forward(batch: StepBatch, interrupt: StepInterrupt | undefined): Float32Array | null;
  forward(batch: StepBatch, interrupt?: StepInterrupt): Float32Array | null {
    const logits = this.model.forward(batch.ids, batch.layout, this.cache, batch.logitRows);
    if (!this.#ran(interrupt)) return null;
    return batch.logitRows.length > 0 ? this.backend.read(logits) : new Float32Array(0);
  }

  /** Runs what the step queued (so that it has run even when nothing is read back);
   * false when `interrupt` stopped it. */
  #ran(interrupt?: StepInterrupt): boolean {
    return this.backend.synchronize?.(interrupt) ?? true;
  }

  deviceBytes(): number {
    return this.backend.deviceBytes?.() ?? 0;
  }

  close(): void {
    this.model.close();
    this.backend.close();
  }
}

/**
 * The runner for `options`: the model on one device in this thread, or split over
 * `tensorParallel` ranks with this thread as rank 0.
 */
export function openRunner(
  file: GgufFile,
  options: LocalRunnerOptions,
  kv: KvPoolSpec,
): ModelRunner {
  const tensorParallel = options.tensorParallel ?? 1;
  if (tensorParallel > 1) return TpRunner.open(file, { ...options, tensorParallel }, kv);
  return LocalRunner.open(file, options, kv);
}

function weightBytes(file: GgufFile): number {
  return file.tensors.reduce((sum, t) => sum + t.nBytes, 0);
}

function kvBytes(spec: KvCacheSpec): number {
  const perToken = 2 * spec.nLayers * kvRowBytes(spec);
  return spec.nBlocks * spec.blockSize * perToken;
}
