import { NeuronError } from "../common/errors.ts";

/**
 * Why a harness refused or failed. The server maps each code to an HTTP status in one place
 * (src/server/errors.ts); codes are stable API.
 */
export type HarnessErrorCode =
  | "unknown_harness"
  | "engine_unavailable"
  | "already_loaded"
  | "model_loading"
  | "model_not_found"
  | "model_unloaded"
  | "served_name_taken"
  | "served_name_unsupported"
  | "speculative_unsupported"
  | "path_not_allowed"
  | "model_file_not_found"
  | "model_file_invalid"
  | "model_load_failed"
  | "harness_unavailable"
  | "upstream_error"
  | "unload_unsupported"
  | "shutting_down";

export class HarnessError extends NeuronError {
  declare readonly code: HarnessErrorCode;
  /** Seconds a client should wait before retrying, for retryable failures. */
  readonly retryAfter?: number;

  constructor(
    code: HarnessErrorCode,
    message: string,
    options?: ErrorOptions & { retryAfter?: number },
  ) {
    super(code, message, options);
    this.retryAfter = options?.retryAfter;
  }
}
