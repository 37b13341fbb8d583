import type { ModelSpec } from "../config/mod.ts";

/**
 * A place where models run: the in-process engine (`native`) or an OpenAI-compatible server
 * neuron proxies to (`external`). The server knows nothing else about either: it asks the
 * registry which harness holds a model and hands it the request.
 */

export type ModelStatus = "loading" | "loaded" | "unloaded" | "recovering" | "failed";

/** One entry of `GET /models` (WIRE.md). */
export interface ModelInfo {
  id: string;
  /** Another name requests may use (`served_name` of the load). */
  served_name?: string;
  harness: string;
  status: ModelStatus;
  devices: number[];
  vram_used_mb: number | null;
  capabilities?: string[];
  limit?: { context: number; output?: number; input?: number };
  tool_call?: boolean;
  reasoning?: boolean;
  servable?: { ok: true } | { ok: false; reason: string; detail?: string };
  /** 0..1 while status is `loading`. */
  progress?: number;
  /** What a load is doing (stage, download bytes, rate, ETA) while status is `loading`. */
  load_progress?: LoadProgressDetail;
  /** Why, when status is `failed`. */
  error?: string;
  /** Weight format, e.g. "Q8_0" (native models). */
  quantization?: string;
  /** Bytes the model holds: weights and KV cache (native models). */
  memory_bytes?: number;
  /**
   * The KV cache (native models): its type, bytes and positions, what one position takes,
   * and what a pool for one 32k or 128k-token context would take (`context_bytes`).
   */
  kv_cache?: {
    type: string;
    bytes: number;
    positions: number;
    bytes_per_position: number;
    context_bytes: Record<string, number>;
  };
}

/** A load's progress as /models shows it. */
export interface LoadProgressDetail {
  stage: string;
  file?: string;
  downloaded_bytes?: number;
  total_bytes?: number;
  bytes_per_sec?: number;
  eta_secs?: number | null;
}

/** A latency histogram: cumulative `counts[i]` of observations <= `buckets[i]` seconds. */
export interface HistogramSnapshot {
  buckets: number[];
  counts: number[];
  sum: number;
  count: number;
}

/** Per-model load numbers for /health and /metrics. */
export interface ModelStats {
  id: string;
  in_flight: number;
  queue_depth: number;
  tok_s_prefill: number;
  tok_s_decode: number;
  /** Running totals, when the harness counts tokens itself. */
  prompt_tokens_total?: number;
  completion_tokens_total?: number;
  /** Requests by how they ended (completed, cancelled, failed, rejected). */
  requests_total?: Record<string, number>;
  time_to_first_token_seconds?: HistogramSnapshot;
  inter_token_latency_seconds?: HistogramSnapshot;
  /** The engine's scheduler and KV cache, for harnesses that batch themselves. */
  scheduler?: SchedulerStats;
}

/** Continuous batching at a glance (native engine). */
export interface SchedulerStats {
  running: number;
  waiting: number;
  kv_blocks_used: number;
  kv_blocks_free: number;
  kv_blocks_cached: number;
  /** Share of prefix-cache lookups (in blocks) that found a cached block, 0..1. */
  prefix_hit_rate: number;
  preemptions: number;
  /** Mean tokens per engine step. */
  mean_batch_tokens: number;
  /** Speculative decoding so far: verification runs, tokens drafted and accepted. */
  spec_verifications: number;
  spec_drafted_tokens: number;
  spec_accepted_tokens: number;
  /** Share of drafted tokens accepted, 0..1 (0 before any draft). */
  spec_acceptance_rate: number;
  /** Tokens a verification produced on average (accepted drafts and the one after). */
  spec_tokens_per_verification: number;
}

export interface HarnessHealth {
  name: string;
  kind: HarnessKind;
  /** `ready`: serving; `starting`: not yet reachable; `down`: was reachable, is not now. */
  state: "ready" | "starting" | "down" | "unavailable";
  detail?: string;
  models: ModelStats[];
}

export type HarnessKind = "native" | "external";

export interface LoadProgress {
  /** 0..1 */
  fraction: number;
  stage: string;
  detail?: LoadProgressDetail;
}

/** The OpenAI routes a harness serves. */
export type InferenceRoute =
  | "chat/completions"
  | "completions"
  | "responses"
  | "embeddings"
  | "rerank";

/** One `/v1/*` request, its body already read (once) by the server. */
export interface InferenceCall {
  route: InferenceRoute;
  model: string;
  /** The body exactly as received, for byte-for-byte proxying. */
  body: Uint8Array<ArrayBuffer>;
  /** The same body, parsed. */
  json: Record<string, unknown>;
  headers: Headers;
  /** Fires when the client goes away or the node gives up on the request (shutdown). */
  signal: AbortSignal;
}

export interface Harness {
  readonly name: string;
  readonly kind: HarnessKind;
  /** Background work that may take time (starting an upstream); never throws. */
  start(): void;
  health(): HarnessHealth;
  list(): ModelInfo[];
  /** Resolves when the model is ready; rejects with a HarnessError otherwise. */
  load(spec: ModelSpec, progress?: (p: LoadProgress) => void): Promise<void>;
  unload(id: string): Promise<void>;
  /** Whether requests for `id` can be routed here. */
  has(id: string): boolean;
  /** Where the gateway should send OpenAI requests for `id`; null unless loaded. */
  endpoint(id: string): string | null;
  serve(call: InferenceCall): Promise<Response>;
  /** Unloads or releases everything the harness holds. */
  close(): Promise<void>;
}

/** What every harness is built with. */
export interface HarnessContext {
  /** This node's own base URL (`http://localhost:<port>`), for `endpoint()`. */
  selfUrl: () => string;
}
