import { errorMessage } from "../common/errors.ts";
import { HarnessError } from "./errors.ts";

/**
 * How an upstream lets models be loaded and unloaded, told apart by the shape of the
 * `status` its `/v1/models` entries carry:
 * - `mistralrs`: a string (`loaded`, `unloaded`, `reloading`);
 *   `POST /v1/models/{reload,unload}` `{"model_id"}`, answered once done.
 * - `llama_router`: llama-server in router mode, an object `{"value": "loaded", ...}`;
 *   `POST /models/{load,unload}` `{"model"}`, answered at once, the change then showing in
 *   the listing (tools/server/README.md, "Using multiple models").
 * - `none`: no status (vLLM, llama-server with one model): the server serves what it
 *   started with and offers no way to load or unload.
 */
export type ModelApi = "mistralrs" | "llama_router" | "none";

/** Where a model stands on its upstream. */
export type UpstreamState = "loaded" | "loading" | "unloaded" | "failed";

/** A model as an OpenAI-compatible upstream lists it in `/v1/models`. */
export interface UpstreamModel {
  id: string;
  state: UpstreamState;
  /** Why, when `failed`. */
  detail?: string;
  /** vLLM reports the context length. */
  max_model_len?: number;
}

export interface UpstreamListing {
  api: ModelApi;
  models: UpstreamModel[];
}

/** An upstream's answer to a management call. */
export interface UpstreamAnswer {
  status: number;
  message: string;
}

const CONTROL_TIMEOUT_MS = 5_000;

function mistralState(status: string): UpstreamState {
  if (status === "unloaded") return "unloaded";
  if (status === "reloading") return "loading";
  return "loaded";
}

/** llama-server router values: unloaded, loading, loaded, sleeping, downloading, downloaded. */
function llamaState(status: Record<string, unknown>): UpstreamModel["state"] {
  const value = status.value;
  if (value === "loaded" || value === "sleeping") return "loaded";
  if (value === "loading" || value === "downloading") return "loading";
  return status.failed === true ? "failed" : "unloaded";
}

function parseModel(m: Record<string, unknown>, id: string): UpstreamModel {
  const out: UpstreamModel = { id, state: "loaded" };
  const status = m.status;
  if (typeof status === "string") out.state = mistralState(status);
  else if (typeof status === "object" && status !== null) {
    const s = status as Record<string, unknown>;
    out.state = llamaState(s);
    if (out.state === "failed") out.detail = `the upstream's instance exited with ${s.exit_code}`;
  }
  if (typeof m.max_model_len === "number") out.max_model_len = m.max_model_len;
  return out;
}

function apiOf(entries: Record<string, unknown>[]): ModelApi {
  const status = entries.find((m) => m.status !== undefined && m.status !== null)?.status;
  if (typeof status === "string") return "mistralrs";
  if (typeof status === "object") return "llama_router";
  return "none";
}

/**
 * The calls neuron makes to an upstream on its own behalf (health, model list, loads and
 * unloads), as opposed to the requests it relays for clients.
 */
export class UpstreamClient {
  readonly base: string;
  readonly #healthPath: string;

  constructor(endpoint: string, healthPath: string) {
    this.base = endpoint.replace(/\/+$/, "");
    this.#healthPath = healthPath;
  }

  /** True when the health route answers 2xx within the timeout. */
  async healthy(timeoutMs = CONTROL_TIMEOUT_MS, signal?: AbortSignal): Promise<boolean> {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const res = await fetch(this.base + this.#healthPath, {
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      await res.body?.cancel();
      return res.ok;
    } catch {
      return false;
    }
  }

  async models(): Promise<UpstreamListing> {
    const url = `${this.base}/v1/models`;
    const { status, text } = await this.#request("GET", "/v1/models", undefined);
    if (status < 200 || status >= 300) {
      throw new HarnessError("upstream_error", `GET ${url} answered ${status}: ${message(text)}`);
    }
    let data: unknown;
    try {
      data = JSON.parse(text)?.data;
    } catch {
      throw new HarnessError("upstream_error", `GET ${url}: answer is not JSON`);
    }
    if (!Array.isArray(data)) throw new HarnessError("upstream_error", `${url}: no "data" list`);
    const entries = data.filter((m): m is Record<string, unknown> =>
      typeof m === "object" && m !== null && typeof m.id === "string"
    );
    return { api: apiOf(entries), models: entries.map((m) => parseModel(m, m.id as string)) };
  }

  /** Asks the upstream to load or unload `modelId` through `api`'s routes. */
  async manage(
    api: Exclude<ModelApi, "none">,
    op: "load" | "unload",
    modelId: string,
  ): Promise<UpstreamAnswer> {
    const [path, body] = api === "mistralrs"
      ? [`/v1/models/${op === "load" ? "reload" : "unload"}`, { model_id: modelId }]
      : [`/models/${op}`, { model: modelId }];
    const { status, text } = await this.#request("POST", path, body);
    return { status, message: message(text) };
  }

  async #request(
    method: string,
    path: string,
    body: unknown,
  ): Promise<{ status: number; text: string }> {
    const url = this.base + path;
    try {
      const res = await fetch(url, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: method === "GET" ? AbortSignal.timeout(CONTROL_TIMEOUT_MS) : undefined,
      });
      return { status: res.status, text: await res.text() };
    } catch (err) {
      throw new HarnessError("harness_unavailable", `${method} ${url}: ${errorMessage(err)}`, {
        cause: err,
        retryAfter: 5,
      });
    }
  }
}

/** The most useful line of an upstream error body (OpenAI envelope, flat, or text). */
function message(text: string): string {
  try {
    const body = JSON.parse(text);
    const msg = body?.error?.message ?? body?.error ?? body?.message;
    if (typeof msg === "string") return msg;
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.trim().slice(0, 300) || "(empty body)";
}
