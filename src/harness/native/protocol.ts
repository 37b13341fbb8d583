/**
 * What crosses between the HTTP thread and a model's Worker (model_worker.ts). Plain,
 * structured-cloneable data only.
 */

import type { EngineStats } from "../../engine/mod.ts";
import type {
  GenerateRequest,
  GenerationEvent,
  PoolRequest,
  PoolResult,
} from "../../frontend/mod.ts";
import type { ModelDescription } from "./describe.ts";
import type { ModelLoadOptions } from "./model_session.ts";

export type HostMessage =
  | { op: "load"; options: ModelLoadOptions; doorbell: SharedArrayBuffer }
  | { op: "generate"; request: GenerateRequest }
  | { op: "pool"; request: PoolRequest }
  | { op: "cancel"; id: string }
  | { op: "stats"; tag: number }
  | { op: "close" };

export type WorkerMessage =
  | { op: "loaded"; description: ModelDescription }
  | { op: "load_failed"; code: string; message: string }
  /** The request was rendered, tokenized and queued. */
  | { op: "accepted"; id: string; promptTokens: number }
  /** The request was refused before it was queued (bad template input, too long). */
  | { op: "rejected"; id: string; code: string; message: string }
  | { op: "event"; id: string; event: GenerationEvent }
  /** A pooling request's result, or why the engine did not finish it. */
  | { op: "pooled"; id: string; result: PoolResult }
  | { op: "pool_failed"; id: string; code: string; message: string }
  | { op: "stats"; tag: number; stats: EngineStats }
  | { op: "closed" };
