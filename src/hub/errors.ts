import { NeuronError } from "../common/errors.ts";

/** Why a model could not be had from a hub or its cache. Codes are stable API. */
export type HubErrorCode =
  /** `model_id` is neither `org/name[@revision]`, `scheme:org/name[@revision]` nor a path. */
  | "invalid_model_id"
  /** `scheme:` names no configured source. */
  | "unknown_source"
  | "repo_not_found"
  /** The repository has no such branch, tag or commit. */
  | "revision_not_found"
  /** No `.gguf` file matches the quant; the message lists the files there are. */
  | "quant_not_found"
  /** Several `.gguf` files and no quant to choose; the message lists them. */
  | "quant_required"
  /** The chosen file is one part of a split GGUF whose other parts are not all there. */
  | "split_gguf_incomplete"
  /** The hub refused our credentials (gated or private repo). */
  | "hub_unauthorized"
  /** The hub could not be reached or failed (network, 408, 5xx): worth retrying. */
  | "hub_unreachable"
  /** The hub answered 429 for longer than the retry budget: worth retrying later. */
  | "hub_rate_limited"
  /** The storage the hub sends downloads to (CDN, Xet bridge) refused even a fresh URL. */
  | "download_refused"
  /** The hub answered something unexpected. */
  | "hub_error"
  /** The bytes received do not match the size or sha256 the hub advertised. */
  | "integrity_failed"
  /** Offline (HF_HUB_OFFLINE) and the file is not in the cache. */
  | "not_cached"
  /** The cache directory could not be written. */
  | "cache_error";

export interface HubErrorOptions extends ErrorOptions {
  /** The HTTP status that caused it, when a server answered. */
  status?: number;
  /** Seconds the server asked us to wait (Retry-After, RateLimit). */
  retryAfter?: number;
}

export class HubError extends NeuronError {
  declare readonly code: HubErrorCode;
  readonly status?: number;
  readonly retryAfter?: number;

  constructor(code: HubErrorCode, message: string, options?: HubErrorOptions) {
    super(code, message, options);
    this.status = options?.status;
    this.retryAfter = options?.retryAfter;
  }
}

/** Codes worth another attempt later (network trouble, an overloaded hub, refused storage). */
export const RETRYABLE_HUB_CODES: ReadonlySet<string> = new Set<HubErrorCode>([
  "hub_unreachable",
  "hub_rate_limited",
  "download_refused",
]);

/**
 * The hub refused or failed to answer: a copy already in the cache may stand in, as
 * huggingface_hub lets it (401, 403, 404, 408, 429, 5xx and network failures).
 */
export const CACHE_FALLBACK_CODES: ReadonlySet<string> = new Set<HubErrorCode>([
  "hub_unreachable",
  "hub_rate_limited",
  "hub_unauthorized",
  "repo_not_found",
]);
