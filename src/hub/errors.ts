import { NeuronError } from "../common/errors.ts";

/** Why a model could not be had from a hub or its cache. Codes are stable API. */
export type HubErrorCode =
  /** `model_id` is neither `org/name`, `scheme:org/name` nor a path. */
  | "invalid_model_id"
  /** `scheme:` names no configured source. */
  | "unknown_source"
  | "repo_not_found"
  /** No `.gguf` file matches the quant; the message lists the files there are. */
  | "quant_not_found"
  /** Several `.gguf` files and no quant to choose; the message lists them. */
  | "quant_required"
  /** The chosen file is one part of a split GGUF, which the engine cannot load. */
  | "split_gguf_unsupported"
  /** The hub refused our credentials (gated or private repo). */
  | "hub_unauthorized"
  /** The hub could not be reached or failed (network, 5xx, 429): worth retrying. */
  | "hub_unreachable"
  /** The hub answered something unexpected. */
  | "hub_error"
  /** The bytes received do not match the size or sha256 the hub advertised. */
  | "integrity_failed"
  /** Offline (HF_HUB_OFFLINE) and the file is not in the cache. */
  | "not_cached"
  /** The cache directory could not be written. */
  | "cache_error";

export class HubError extends NeuronError {
  declare readonly code: HubErrorCode;

  constructor(code: HubErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

/** Codes worth another attempt later (network trouble, an overloaded hub). */
export const RETRYABLE_HUB_CODES: ReadonlySet<string> = new Set<HubErrorCode>(["hub_unreachable"]);
