/**
 * The in-process engine as a harness: loads GGUF models (a path inside `model_dirs`, or a
 * hub repository downloaded into the cache) into one engine Worker each, and serves the
 * OpenAI routes for them with admission control.
 */

import type { CudaConfig, ModelSpec, NativeConfig } from "../../config/mod.ts";
import { errorMessage, NeuronError } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { KvDType } from "../../backend/backend.ts";
import type { DownloadProgress } from "../../hub/mod.ts";
import type { SpeculativeParams } from "../../engine/mod.ts";
import { HarnessError } from "../errors.ts";
import type {
  Harness,
  HarnessContext,
  HarnessHealth,
  HarnessKind,
  InferenceCall,
  LoadProgress,
  LoadProgressDetail,
  ModelInfo,
} from "../harness.ts";
import type { RopeScalingConfig } from "../../models/rope_scaling.ts";
import { allowedModelPath } from "../model_path.ts";
import { LoadedModel } from "./loaded_model.ts";
import { ModelHost } from "./model_host.ts";
import { ModelNames } from "./model_names.ts";
import { modelFile } from "./model_source.ts";

/**
 * Tokens per engine step at most: longer prompts are prefilled in chunks, so running
 * sequences keep decoding between them and the step's scratch memory stays bounded.
 */
const MAX_BATCH_TOKENS = 512;
/** Share of a load's progress given to the download; the rest is reading the weights. */
const DOWNLOAD_SHARE = 0.9;

interface Loading {
  progress: number;
  detail: LoadProgressDetail;
}

export class NativeHarness implements Harness {
  readonly name: string;
  readonly kind: HarnessKind = "native";
  readonly #config: NativeConfig;
  readonly #ctx: HarnessContext;
  readonly #env: Record<string, string>;
  readonly #models = new Map<string, LoadedModel>();
  readonly #names = new ModelNames();
  readonly #loading = new Map<string, Loading>();
  readonly #closing = new AbortController();

  readonly #cuda: CudaConfig | undefined;

  constructor(
    name: string,
    config: NativeConfig,
    ctx: HarnessContext,
    cuda?: CudaConfig,
    env: Record<string, string> = Deno.env.toObject(),
  ) {
    this.name = name;
    this.#config = config;
    this.#cuda = cuda;
    this.#ctx = ctx;
    this.#env = env;
  }

  start(): void {}

  health(): HarnessHealth {
    return {
      name: this.name,
      kind: this.kind,
      state: "ready",
      models: [...this.#models.values()].map((m) => m.stats()),
    };
  }

  list(): ModelInfo[] {
    const loading = [...this.#loading].map(([id, l]): ModelInfo => ({
      id,
      harness: this.name,
      status: "loading",
      devices: [],
      vram_used_mb: null,
      progress: l.progress,
      load_progress: { ...l.detail },
    }));
    return [...loading, ...[...this.#models.values()].map((m) => m.info())];
  }

  /**
   * Loads `spec`. A model loaded by path has its canonical path as its id, so two spellings
   * of one file are one model; the spelling used and `served_name` become its other names.
   * A model that failed (its engine crashed, its recovery failed) is replaced.
   */
  async load(spec: ModelSpec, onProgress?: (p: LoadProgress) => void): Promise<void> {
    const local = await allowedModelPath(spec.model_id, this.#config.model_dirs);
    const id = local ?? spec.model_id;
    const failed = this.#models.get(id);
    if ((failed && failed.status !== "failed") || this.#loading.has(id)) {
      throw new HarnessError("already_loaded", `model ${id} is already loaded`);
    }
    this.#names.check(spec.served_name, id, (name) => this.#models.has(name));
    if (failed) {
      log.info("replacing a failed model", { model: id });
      await this.#unload(id, failed);
    }
    const tensorParallel = spec.tensor_parallel ?? 1;
    // WIRE.md: devices default to [0..tensor_parallel); the schema checks a given list's length.
    const devices = spec.devices ?? Array.from({ length: tensorParallel }, (_, i) => i);
    const mlog = log.child({ model: id, harness: this.name });
    const state: Loading = { progress: 0, detail: { stage: "resolving" } };
    const report = (): void =>
      onProgress?.({
        fraction: state.progress,
        stage: state.detail.stage,
        detail: { ...state.detail },
      });
    this.#loading.set(id, state);
    try {
      const path = local ?? await modelFile(spec, this.#config, {
        env: this.#env,
        signal: this.#closing.signal,
        log: mlog,
        onDownload: (p: DownloadProgress) => {
          state.progress = p.total ? (p.bytes / p.total) * DOWNLOAD_SHARE : 0;
          state.detail = {
            stage: "downloading",
            file: p.file,
            downloaded_bytes: p.bytes,
            total_bytes: p.total,
            bytes_per_sec: Math.round(p.bytesPerSec),
            eta_secs: p.etaSecs === null ? null : Math.round(p.etaSecs),
          };
          report();
        },
      });
      state.progress = DOWNLOAD_SHARE;
      state.detail = { stage: "loading weights", file: path };
      report();
      const draftModelPath = spec.draft_model
        ? await allowedModelPath(spec.draft_model, this.#config.model_dirs) ??
          await modelFile({ ...spec, model_id: spec.draft_model, revision: null }, this.#config, {
            env: this.#env,
            signal: this.#closing.signal,
            log: mlog,
            onDownload: () => {},
          })
        : undefined;
      const start = (): Promise<ModelHost> =>
        this.#startEngine(id, path, {
          tensorParallel,
          devices,
          kvDtype: spec.kv_type ?? this.#config.kv_type,
        }, {
          ...(spec.speculative ? { speculative: spec.speculative } : {}),
          ...(draftModelPath ? { draftModelPath } : {}),
        }, ropeScaling(spec));
      const host = await start();
      if (this.#closing.signal.aborted) {
        await host.close();
        throw new HarnessError(
          "shutting_down",
          `load of ${id} abandoned: the node is shutting down`,
        );
      }
      const a = this.#config.admission;
      const limits = {
        maxInFlight: a.max_in_flight,
        maxQueueDepth: a.max_queue_depth,
        maxWaitSecs: a.max_wait_secs,
      };
      const restart = tensorParallel > 1 ? start : null;
      const served = spec.served_name ?? undefined;
      this.#models.set(
        id,
        new LoadedModel(id, this.name, host, limits, devices, { restart, servedName: served }),
      );
      this.#names.add(id, [spec.model_id, served]);
      const d = host.description;
      mlog.info("model ready", {
        path,
        device: d.device,
        quantization: d.quantization,
        context: d.contextLength,
        weight_bytes: d.weightBytes,
        kv_bytes: d.kvBytes,
      });
    } finally {
      this.#loading.delete(id);
    }
  }

  async #startEngine(
    id: string,
    path: string,
    split: { tensorParallel: number; devices: number[]; kvDtype: KvDType },
    speculation: { speculative?: Partial<SpeculativeParams>; draftModelPath?: string },
    ropeScaling: RopeScalingConfig | undefined,
  ): Promise<ModelHost> {
    try {
      return await ModelHost.start({
        ...split,
        modelPath: path,
        device: this.#config.device,
        threads: this.#config.threads ?? 0,
        mmap: this.#config.mmap,
        repack: this.#config.repack,
        contextLength: this.#config.context_length ?? 0,
        maxSequences: this.#config.admission.max_in_flight,
        maxBatchTokens: MAX_BATCH_TOKENS,
        kvBudgetBytes: this.#config.kv_budget_bytes,
        stepTargetMs: this.#config.step_target_ms,
        cuda: this.#cuda && { libcuda: this.#cuda.libcuda, libcublas: this.#cuda.libcublas },
        ...speculation,
        ropeScaling,
      });
    } catch (err) {
      const code = err instanceof NeuronError ? err.code : "";
      if (code === "unshardable") {
        // The request asked for a split this model cannot take: a client error, not a failure.
        throw new NeuronError(
          "tensor_parallel_unavailable",
          `cannot load ${id} with tensor_parallel=${split.tensorParallel}: ${errorMessage(err)}`,
          { cause: err },
        );
      }
      const where = path === id ? id : `${id} from ${path}`;
      if (code === "unsupported_architecture" || code === "unsupported_arch") {
        // A file of an architecture no family reads: the client chose the wrong model.
        throw new NeuronError(
          "unsupported_architecture",
          `cannot load ${where}: ${errorMessage(err)}`,
          {
            cause: err,
          },
        );
      }
      if (code === "cuda_unavailable" || code === "kv_type_unsupported") {
        throw new NeuronError(code, `cannot load ${where}: ${errorMessage(err)}`, { cause: err });
      }
      if (code === "cuda_out_of_memory" || code === "cpu_out_of_memory") {
        // Weights or KV cache larger than the device's free memory: refused before allocating.
        throw new NeuronError("insufficient_memory", `cannot load ${where}: ${errorMessage(err)}`, {
          cause: err,
        });
      }
      throw new HarnessError("model_load_failed", `cannot load ${where}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  async unload(name: string): Promise<void> {
    const id = this.#names.resolve(name);
    const model = this.#models.get(id);
    if (!model) throw new HarnessError("model_not_found", `model ${name} is not loaded`);
    await this.#unload(id, model);
  }

  async #unload(id: string, model: LoadedModel): Promise<void> {
    this.#models.delete(id);
    this.#names.forget(id);
    await model.close({ code: "model_unloaded", message: `model ${id} was unloaded` });
  }

  has(name: string): boolean {
    return this.#models.has(this.#names.resolve(name));
  }

  endpoint(name: string): string | null {
    return this.#models.get(this.#names.resolve(name))?.host.alive ? this.#ctx.selfUrl() : null;
  }

  serve(call: InferenceCall): Promise<Response> {
    const model = this.#models.get(this.#names.resolve(call.model));
    if (!model) {
      return Promise.reject(
        new HarnessError("model_not_found", `The model '${call.model}' does not exist`),
      );
    }
    return model.serve(call);
  }

  async close(): Promise<void> {
    this.#closing.abort(new HarnessError("shutting_down", "the node is shutting down"));
    const models = [...this.#models.values()];
    this.#models.clear();
    await Promise.all(
      models.map((m) => m.close({ code: "shutting_down", message: "the node is shutting down" })),
    );
  }
}

/** The rope scaling a load asks for, as the model reader takes it. */
function ropeScaling(spec: ModelSpec): RopeScalingConfig | undefined {
  const r = spec.rope_scaling;
  if (!r) return undefined;
  return { type: r.type, factor: r.factor, originalContextLength: r.original_context_length };
}
