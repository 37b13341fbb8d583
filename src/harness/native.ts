import type { ModelSpec, NativeConfig } from "../config/mod.ts";
import { HarnessError } from "./errors.ts";
import type { Harness, HarnessHealth, HarnessKind, InferenceCall, ModelInfo } from "./harness.ts";
import { allowedModelPath } from "./model_path.ts";

const NOT_BUILT = "the native engine is not built yet in this version of neuron";

/**
 * The in-process engine. Registered so the node reports it and fleet configs that name it
 * load, but until the engine lands every load is refused with `engine_unavailable`: a clear
 * 400, never a pretend success.
 */
export class NativeHarness implements Harness {
  readonly name: string;
  readonly kind: HarnessKind = "native";
  readonly #config: NativeConfig;

  constructor(name: string, config: NativeConfig) {
    this.name = name;
    this.#config = config;
  }

  start(): void {}

  health(): HarnessHealth {
    return {
      name: this.name,
      kind: this.kind,
      state: "unavailable",
      detail: NOT_BUILT,
      models: [],
    };
  }

  list(): ModelInfo[] {
    return [];
  }

  async load(spec: ModelSpec): Promise<void> {
    await allowedModelPath(spec.model_id, this.#config.model_dirs);
    throw new HarnessError("engine_unavailable", `cannot load ${spec.model_id}: ${NOT_BUILT}`);
  }

  unload(id: string): Promise<void> {
    return Promise.reject(new HarnessError("model_not_found", `model ${id} is not loaded`));
  }

  has(): boolean {
    return false;
  }

  endpoint(): string | null {
    return null;
  }

  serve(call: InferenceCall): Promise<Response> {
    return Promise.reject(
      new HarnessError("model_not_found", `model ${call.model} is not loaded`),
    );
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
