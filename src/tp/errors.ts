import { NeuronError } from "../common/errors.ts";

/** The error kinds a worker answers with (WIRE.md, tensor-parallel workers). */
export const WORKER_ERROR_KINDS = [
  "bad_request",
  "cuda_unavailable",
  "nccl_init_failed",
  "nccl_not_initialised",
  "nccl_sanity_failed",
  "already_loaded",
  "load_failed",
  "unsupported_arch",
  "model_not_loaded",
  "forward_failed",
] as const;

export type WorkerErrorKind = (typeof WORKER_ERROR_KINDS)[number];

/**
 * Codes of tensor parallelism beyond the workers' own kinds:
 * - `tp_worker_failed`: the group is broken (a worker died, missed its deadline, broke the
 *   protocol, or a step failed on some rank); the model must be unloaded and reloaded.
 * - `tp_spawn_failed`: a worker process could not be started.
 * - `tp_unavailable`: the native support (CPU kernel library) is missing.
 * - `comm_failed`: a collective failed on this rank (aborted, a peer died, a system error).
 */
export type TpErrorCode =
  | WorkerErrorKind
  | "tp_worker_failed"
  | "tp_spawn_failed"
  | "tp_unavailable"
  | "comm_failed";

export class TpError extends NeuronError {
  declare readonly code: TpErrorCode;

  constructor(code: TpErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

export function isWorkerErrorKind(kind: string): kind is WorkerErrorKind {
  return (WORKER_ERROR_KINDS as readonly string[]).includes(kind);
}
