/** The model on one device, in this thread: a backend of its own and the model bound to it. */

import {
  type Backend,
  type DeviceMemory,
  deviceMemoryOf,
  kvCacheBytes,
  type KvPoolSpec,
  type Step,
  type StepInterrupt,
} from "../backend/backend.ts";
import { createBackend, type DeviceChoice } from "../backend/mod.ts";
import { type RowDraws, rowDrawsOf } from "../backend/row_draws.ts";
import type { GgufModel, ModelShape } from "../models/family.ts";
import { ModelInstance } from "../models/instance.ts";
import { HostDraws } from "./host_draws.ts";
import type { ModelRunner } from "./runner.ts";

export interface LocalRunnerOptions {
  device: DeviceChoice;
  threads: number;
  /** CPU: weights read in place from the mmapped file (default) or copied (false). */
  mmap?: boolean;
  /** CPU: Q8_0, Q4_K and Q6_K matrices repacked at load for few-row products (default true). */
  repack?: boolean;
  /** Where the CUDA libraries are ([cuda] of neuron.toml). */
  cuda?: { libcuda?: string; libcublas?: string };
  /** The CUDA device (default 0). */
  cudaDevice?: number;
}

export class LocalRunner implements ModelRunner {
  readonly drawRows?: RowDraws["drawRows"];
  /** Host threads of its own for the draws, where the backend's are a device's. */
  readonly #hostDraws: HostDraws | null;

  private constructor(
    readonly shape: ModelShape,
    private readonly backend: Backend,
    private readonly memory: DeviceMemory | null,
    private readonly instance: ModelInstance,
    threads: number,
  ) {
    const own = rowDrawsOf(backend);
    this.#hostDraws = own ? null : HostDraws.open(threads);
    const draws = own ?? this.#hostDraws;
    if (draws) this.drawRows = (...a) => draws.drawRows(...a);
  }

  /** Binds `model` to a new backend with a KV pool of `kv`. */
  static open(model: GgufModel, options: LocalRunnerOptions, kv: KvPoolSpec): LocalRunner {
    const backend = createBackend(options.device, {
      threads: options.threads,
      mmap: options.mmap,
      repack: options.repack,
      cuda: { ...options.cuda, device: options.cudaDevice ?? 0 },
    });
    try {
      const memory = deviceMemoryOf(backend);
      const kvBytes = kvCacheBytes({ ...model.shape, ...kv });
      memory?.ensureFits(model.file.tensorBytes + kvBytes, "the model and its KV cache");
      const instance = ModelInstance.create(model, backend, kv);
      return new LocalRunner(model.shape, backend, memory, instance, options.threads);
    } catch (err) {
      backend.close();
      throw err;
    }
  }

  get device(): string {
    return this.backend.kind;
  }

  get kvBytes(): number {
    return this.instance.kvBytes;
  }

  forward(step: Step): Float32Array;
  forward(
    step: Step,
    interrupt: StepInterrupt | undefined,
    into?: Float32Array,
  ): Float32Array | null;
  forward(step: Step, interrupt?: StepInterrupt, into?: Float32Array): Float32Array | null {
    return this.instance.forward(step, interrupt, into);
  }

  forwardArgmax(
    step: Step,
    interrupt?: StepInterrupt,
    masks?: readonly (Uint32Array | null)[],
  ): Int32Array | null {
    return this.instance.forwardArgmax(step, interrupt, masks);
  }

  readonly copyKvRows = (from: number, to: number, rows: number): void =>
    this.instance.copyKvRows(from, to, rows);

  deviceBytes(): number {
    return this.memory?.deviceBytes() ?? 0;
  }

  close(): void {
    this.instance.close();
    this.backend.close();
    this.#hostDraws?.close();
  }
}
