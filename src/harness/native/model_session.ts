/**
 * One loaded model, in one thread: its file read once, the front end (text), a runner
 * (the model on its device or split over ranks) and the engine core between them. The
 * model's Worker (model_worker.ts) runs one; `neuron generate` runs one in its own thread.
 */

import { NeuronError } from "../../common/errors.ts";
import type { DeviceChoice } from "../../backend/mod.ts";
import {
  type KvDType,
  kvDTypeProblem,
  type KvPoolSpec,
  type StepInterrupt,
} from "../../backend/backend.ts";
import {
  Engine,
  type EngineStats,
  GREEDY,
  kvPoolBlocks,
  type SpeculativeParams,
} from "../../engine/mod.ts";
import {
  FrontEnd,
  type GenerateRequest,
  type GenerationEvent,
  type Pause,
  type PoolRequest,
  type PoolResult,
} from "../../frontend/mod.ts";
import type { GgufModel } from "../../models/family.ts";
import type { RopeScalingConfig } from "../../models/rope_scaling.ts";
import { type ModelRunner, openModel, openRunner } from "../../runner/mod.ts";
import { describeModel, type ModelDescription } from "./describe.ts";
import { ModelGoneError, PoolFailedError } from "./errors.ts";

const KV_BLOCK_SIZE = 16;

export interface ModelLoadOptions {
  modelPath: string;
  /** "auto" picks CUDA when present, else the CPU kernels. */
  device: DeviceChoice;
  /** CPU threads (0 = all cores). */
  threads: number;
  /** CPU: weights read in place from the mmapped file (default) or copied (false). */
  mmap?: boolean;
  /** CPU: Q8_0, Q4_K and Q6_K matrices repacked at load for few-row products (default true). */
  repack?: boolean;
  /** Cap on the context (0 = the model's). Never silently below what a request needs. */
  contextLength: number;
  /** Sequences decoded together. */
  maxSequences: number;
  /** Tokens per step at most (prefill chunk size). */
  maxBatchTokens: number;
  /** Steps carrying prompt chunks are sized to take about this long (default 150 ms). */
  stepTargetMs?: number;
  /** CUDA library names or paths ([cuda] of neuron.toml). */
  cuda?: { libcuda?: string; libcublas?: string };
  /** KV cache pool size in bytes (never less than one full context; absent = that). */
  kvBudgetBytes?: number;
  kvDtype: KvDType;
  /** Ranks the model is split over (tensor parallelism); absent or 1: one device. */
  tensorParallel?: number;
  /** The CUDA device of each rank (WIRE.md `devices`). */
  devices?: number[];
  /** Speculative decoding for requests that do not choose (the model spec's `speculative`). */
  speculative?: Partial<SpeculativeParams>;
  /** A draft model's file (same vocabulary), run on the first device beside the model. */
  draftModelPath?: string;
  /** Rope scaling in place of the file's (its context then follows: YaRN's factor x original). */
  ropeScaling?: RopeScalingConfig;
}

export class ModelSession {
  readonly description: ModelDescription;
  #closed = false;

  private constructor(
    private readonly model: GgufModel,
    private readonly frontEnd: FrontEnd,
    private readonly runner: ModelRunner,
    private readonly engine: Engine,
    contextLength: number,
    private readonly draft: { model: GgufModel; runner: ModelRunner } | null,
    kv: KvPoolSpec,
  ) {
    this.description = describeModel(model, frontEnd, runner, contextLength, kv);
  }

  /** Opens the model file and builds everything; a failure releases what was built. */
  static open(options: ModelLoadOptions): ModelSession {
    const model = openModel(options.modelPath, options.ropeScaling);
    try {
      const cap = options.contextLength > 0 ? options.contextLength : model.shape.contextLength;
      const contextLength = Math.min(cap, model.shape.contextLength);
      const kvProblem = kvDTypeProblem(options.kvDtype, model.shape.headDim);
      if (kvProblem !== null) throw new NeuronError("kv_type_unsupported", kvProblem);
      const frontEnd = FrontEnd.fromGguf(model.file, contextLength, model.pooling.rerankPrompt);
      const kv = {
        blockSize: KV_BLOCK_SIZE,
        nBlocks: kvPoolBlocks(
          model.shape,
          contextLength,
          options.kvBudgetBytes ?? 0,
          options.kvDtype,
          KV_BLOCK_SIZE,
        ),
        dtype: options.kvDtype,
      };
      const runner = openRunner(model, options, kv);
      let draft: { model: GgufModel; runner: ModelRunner; kv: typeof kv } | null = null;
      try {
        if (options.draftModelPath !== undefined) draft = openDraft(options, contextLength);
        const engine = new Engine(runner, {
          contextLength,
          maxSequences: options.maxSequences,
          maxBatchTokens: options.maxBatchTokens,
          stepTargetMs: options.stepTargetMs,
          kv,
          hidden: model.pooling.kind !== "text",
          speculative: options.speculative,
          ...(draft ? { draft: { runner: draft.runner, kv: draft.kv } } : {}),
        });
        return new ModelSession(model, frontEnd, runner, engine, contextLength, draft, kv);
      } catch (err) {
        runner.close();
        if (draft) closeDraft(draft);
        throw err;
      }
    } catch (err) {
      model.file.close();
      throw err;
    }
  }

  get hasWork(): boolean {
    return this.engine.hasWork;
  }

  /**
   * Renders, tokenizes and queues a request; its events go to `sink`. Resolves with the
   * prompt's length in tokens, which `queued` also receives the moment the request is
   * queued: whatever announces the request to its reader belongs there, since a step may
   * run (and send the first token) before a `.then` on the promise does. A long prompt is
   * tokenized a slice at a time, `pause` between slices. Errors (bad template input, prompt
   * too long, the session closed meanwhile) reject it, before anything is queued.
   */
  async submit(
    request: GenerateRequest,
    sink: (event: GenerationEvent) => void,
    pause?: Pause,
    queued?: (promptTokens: number) => void,
  ): Promise<number> {
    const prepared = await this.frontEnd.prepare(request, sink, pause);
    if (this.#closed) throw new ModelGoneError("engine_closed", "the model was unloaded");
    this.engine.submit(prepared.request, prepared.outputs);
    const promptTokens = prepared.request.prompt.length;
    queued?.(promptTokens);
    return promptTokens;
  }

  /**
   * Tokenizes a pooling request's inputs (`pause` between them) and queues one sequence
   * per input; resolves once they are queued, with the promise of the result: each input's
   * pooled final hidden state (an embedding model) or its score (a reranker's head). Errors
   * (an input too long, a model that does not pool) reject it before anything is queued.
   */
  async pool(request: PoolRequest, pause?: Pause): Promise<{ result: Promise<PoolResult> }> {
    const { pooling, rankHead } = this.model.pooling;
    if (pooling === null) {
      throw new PoolFailedError("invalid_request", "this model does not pool hidden states");
    }
    if (request.inputs.length === 0) throw new PoolFailedError("invalid_request", "no inputs");
    const prompts = await this.frontEnd.poolPrompts(request.inputs, pause);
    if (this.#closed) throw new ModelGoneError("engine_closed", "the model was unloaded");
    const vectors: Float32Array[] = new Array(prompts.length);
    let left = prompts.length;
    let settle!: { resolve: (r: PoolResult) => void; reject: (e: Error) => void };
    const result = new Promise<PoolResult>((resolve, reject) => (settle = { resolve, reject }));
    const done = (): void => {
      if (--left > 0) return;
      settle.resolve({
        vectors: rankHead === null ? vectors : [],
        scores: rankHead === null ? [] : vectors.map((v) => rankHead.score(v)[0]),
        promptTokens: prompts.reduce((n, p) => n + p.length, 0),
      });
    };
    let failed = false;
    const fail = (code: string, message: string): void => {
      if (failed) return;
      failed = true;
      settle.reject(new PoolFailedError(code, message));
      this.engine.cancel(request.id);
    };
    try {
      prompts.forEach((prompt, i) =>
        this.engine.submit(
          { id: request.id, prompt, sampling: GREEDY, stopTokenIds: [], pooling },
          {
            token: () => false,
            pooled: (v) => (vectors[i] = v),
            finished: (reason) =>
              reason === "cancelled"
                ? fail("request_cancelled", "the request was cancelled")
                : done(),
            failed: (code, message) => fail(code, message),
          },
        )
      );
    } catch (err) {
      // What was queued before the input that failed is dropped; the refusal is the answer.
      result.catch(() => {});
      this.engine.cancel(request.id);
      throw err;
    }
    return { result };
  }

  /** Stops a request (queued or running); it ends with a `done` of reason `cancelled`. */
  cancel(id: string): void {
    this.engine.cancel(id);
  }

  /** Runs one step of the engine (see Engine.step). */
  step(interrupt?: StepInterrupt): void {
    this.engine.step(interrupt);
  }

  /** Fails every request with an error (a step that could not run). */
  failAll(code: string, message: string): void {
    this.engine.failAll(code, message);
  }

  stats(): EngineStats {
    return this.engine.stats();
  }

  /** Ends every request, then frees the runner and the file. */
  close(): void {
    this.#closed = true;
    this.engine.cancelAll();
    this.runner.close();
    if (this.draft) closeDraft(this.draft);
    this.model.file.close();
  }
}

/** The draft model on the first device, with a KV pool of one full context. */
function openDraft(
  options: ModelLoadOptions,
  contextLength: number,
): { model: GgufModel; runner: ModelRunner; kv: KvPoolSpec } {
  const model = openModel(options.draftModelPath!);
  try {
    const kv = {
      blockSize: KV_BLOCK_SIZE,
      nBlocks: kvPoolBlocks(model.shape, contextLength, 0, options.kvDtype, KV_BLOCK_SIZE),
      dtype: options.kvDtype,
    };
    const { tensorParallel: _, devices, ...local } = options;
    const runner = openRunner(model, { ...local, devices: devices?.slice(0, 1) }, kv);
    return { model, runner, kv };
  } catch (err) {
    model.file.close();
    throw err;
  }
}

function closeDraft(draft: { model: GgufModel; runner: ModelRunner }): void {
  draft.runner.close();
  draft.model.file.close();
}
