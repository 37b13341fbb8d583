import { errorMessage } from "../common/errors.ts";
import { HarnessError } from "./errors.ts";

/** A model as an OpenAI-compatible upstream lists it in `/v1/models`. */
export interface UpstreamModel {
  id: string;
  /** mistral.rs: loaded | unloaded | reloading; absent on servers that always serve. */
  status?: string;
  /** vLLM reports the context length. */
  max_model_len?: number;
}

const CONTROL_TIMEOUT_MS = 5_000;

/**
 * The calls neuron makes to an upstream on its own behalf (health, model list, mistral.rs
 * reload/unload), as opposed to the requests it relays for clients.
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

  async models(): Promise<UpstreamModel[]> {
    const body = await this.#json("GET", "/v1/models", undefined, CONTROL_TIMEOUT_MS);
    const data = (body as { data?: unknown })?.data;
    if (!Array.isArray(data)) {
      throw new HarnessError("upstream_error", `${this.base}/v1/models: no "data" list`);
    }
    return data.flatMap((m): UpstreamModel[] => {
      if (typeof m !== "object" || m === null || typeof m.id !== "string") return [];
      return [{
        id: m.id,
        status: typeof m.status === "string" ? m.status : undefined,
        max_model_len: typeof m.max_model_len === "number" ? m.max_model_len : undefined,
      }];
    });
  }

  /** mistral.rs `POST /v1/models/{reload,unload}` `{model_id}`. */
  async modelOp(op: "reload" | "unload", modelId: string, signal?: AbortSignal): Promise<void> {
    await this.#json("POST", `/v1/models/${op}`, { model_id: modelId }, undefined, signal);
  }

  async #json(
    method: string,
    path: string,
    body: unknown,
    timeoutMs?: number,
    signal?: AbortSignal,
  ): Promise<unknown> {
    const url = this.base + path;
    const signals = [signal, timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined]
      .filter((s): s is AbortSignal => s !== undefined);
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signals.length ? AbortSignal.any(signals) : undefined,
      });
    } catch (err) {
      throw new HarnessError("harness_unavailable", `${method} ${url}: ${errorMessage(err)}`, {
        cause: err,
        retryAfter: 5,
      });
    }
    const text = await res.text();
    if (!res.ok) {
      throw new HarnessError(
        res.status === 404 ? "model_not_found" : "upstream_error",
        `${method} ${url} answered ${res.status}: ${upstreamMessage(text)}`,
      );
    }
    try {
      return text ? JSON.parse(text) : null;
    } catch {
      throw new HarnessError("upstream_error", `${method} ${url}: answer is not JSON`);
    }
  }
}

/** The most useful line of an upstream error body (OpenAI envelope, flat, or text). */
function upstreamMessage(text: string): string {
  try {
    const body = JSON.parse(text);
    const msg = body?.error?.message ?? body?.error ?? body?.message;
    if (typeof msg === "string") return msg;
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.trim().slice(0, 300) || "(empty body)";
}
