import { NeuronError } from "../../common/errors.ts";

/** The model's Worker is gone: closed (`engine_closed`) or crashed (`engine_crashed`). */
export class ModelGoneError extends NeuronError {
  declare readonly code: "engine_closed" | "engine_crashed";

  constructor(code: "engine_closed" | "engine_crashed", message: string) {
    super(code, message);
  }
}

/**
 * A pooling request (embeddings, rerank) the engine did not finish: a failed step, the
 * model unloaded, the request cancelled. Keeps the engine's code (e.g. `tp_worker_failed`).
 */
export class PoolFailedError extends NeuronError {}
