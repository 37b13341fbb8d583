import { errorMessage, NeuronError } from "../common/errors.ts";
import { log } from "../common/log.ts";

/**
 * Every error an HTTP client can see, and its status, in one place. Control-plane routes
 * answer a flat `{"error", "code"}` (what the gateway decodes); `/v1/*` answers OpenAI's
 * envelope `{"error": {"message", "type", "code", "param"}}`.
 */

export type ServerErrorCode =
  | "malformed_json"
  | "invalid_request_body"
  | "unsupported_media_type"
  | "payload_too_large"
  | "unauthorized"
  | "not_found"
  | "method_not_allowed"
  | "shutting_down"
  | "internal_error";

export class ServerError extends NeuronError {
  declare readonly code: ServerErrorCode;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(
    code: ServerErrorCode,
    message: string,
    options?: { param?: string | null; headers?: Record<string, string> },
  ) {
    super(code, message);
    this.param = options?.param ?? null;
    this.headers = options?.headers ?? {};
  }
}

const STATUS: Record<string, number> = {
  // request problems
  malformed_json: 400,
  // 400 on /v1 (OPENAI_STATUS); the control plane keeps 422.
  invalid_request_body: 422,
  unsupported_media_type: 415,
  payload_too_large: 413,
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  // a request body that broke off or was malformed (src/http)
  malformed_request: 400,
  client_closed: 400,
  request_timeout: 408,
  // model management
  unknown_harness: 400,
  engine_unavailable: 400,
  path_not_allowed: 403,
  model_not_found: 404,
  already_loaded: 409,
  served_name_taken: 409,
  served_name_unsupported: 400,
  speculative_unsupported: 400,
  model_loading: 503,
  model_file_not_found: 404,
  model_file_invalid: 400,
  unsupported_architecture: 400,
  cuda_unavailable: 503,
  kv_type_unsupported: 400,
  insufficient_memory: 507,
  model_load_failed: 500,
  upstream_error: 502,
  unload_unsupported: 501,
  harness_unavailable: 503,
  shutting_down: 503,
  tp_worker_failed: 503,
  internal_error: 500,
  tensor_parallel_unavailable: 400,
  // hub downloads
  invalid_model_id: 400,
  unknown_source: 400,
  repo_not_found: 404,
  quant_not_found: 404,
  quant_required: 400,
  split_gguf_incomplete: 404,
  revision_not_found: 404,
  hub_unauthorized: 403,
  hub_unreachable: 502,
  hub_rate_limited: 503,
  download_refused: 502,
  hub_error: 502,
  integrity_failed: 502,
  not_cached: 404,
  cache_error: 500,
  // inference
  invalid_request: 400,
  context_length_exceeded: 400,
  template_unavailable: 400,
  template_render_failed: 400,
  chat_template_failed: 500,
  // structured output (src/constrain)
  invalid_grammar: 400,
  invalid_schema: 400,
  unsupported_schema: 400,
  grammar_too_complex: 400,
  rate_limit_exceeded: 503,
  model_unloaded: 503,
  request_cancelled: 503,
  engine_closed: 503,
  engine_crashed: 500,
};

/**
 * Where `/v1/*` answers differently: OpenAI and vLLM answer 400 to a body of the wrong
 * shape, and the `openai` SDKs raise BadRequestError only for 400.
 */
const OPENAI_STATUS: Record<string, number> = { invalid_request_body: 400 };

/** Seconds to suggest in Retry-After for retryable statuses without their own hint. */
const DEFAULT_RETRY_AFTER = 5;

interface Mapped {
  status: number;
  code: string;
  message: string;
  param: string | null;
  headers: Record<string, string>;
}

function map(err: unknown, overrides: Record<string, number> = {}): Mapped {
  if (err instanceof NeuronError && Object.hasOwn(STATUS, err.code)) {
    const status = Object.hasOwn(overrides, err.code) ? overrides[err.code] : STATUS[err.code];
    const headers: Record<string, string> = err instanceof ServerError ? { ...err.headers } : {};
    // HarnessError, AdmissionError and others carry their own hint and offending field.
    const { retryAfter, param } = err as { retryAfter?: unknown; param?: unknown };
    if (status === 503 || status === 429) {
      headers["retry-after"] = String(
        typeof retryAfter === "number" ? retryAfter : DEFAULT_RETRY_AFTER,
      );
    }
    return {
      status,
      code: err.code,
      message: err.message,
      param: typeof param === "string" ? param : null,
      headers,
    };
  }
  log.error("unhandled error", { error: errorMessage(err), stack: (err as Error)?.stack });
  return {
    status: 500,
    code: "internal_error",
    message: "internal error",
    param: null,
    headers: {},
  };
}

function json(body: unknown, status: number, headers: Record<string, string>): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** The control-plane form: `{"error": "<message>", "code": "<code>"}`. */
export function controlErrorResponse(err: unknown): Response {
  const m = map(err);
  return json({ error: m.message, code: m.code }, m.status, m.headers);
}

function openaiType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** The OpenAI form: `{"error": {"message", "type", "code", "param"}}`. */
export function openaiErrorResponse(err: unknown): Response {
  const m = map(err, OPENAI_STATUS);
  return json(
    { error: { message: m.message, type: openaiType(m.status), code: m.code, param: m.param } },
    m.status,
    m.headers,
  );
}

/** `/v1/*` speaks OpenAI; everything else is control plane. */
export function isOpenAiPath(path: string): boolean {
  return path === "/v1" || path.startsWith("/v1/");
}
