import type { HarnessEntry, ModelSpec } from "../config/mod.ts";
import { errorMessage } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { HarnessError } from "./errors.ts";
import type {
  Harness,
  HarnessContext,
  HarnessHealth,
  HarnessKind,
  InferenceCall,
  ModelInfo,
  ModelStatus,
} from "./harness.ts";
import { clientResponseHeaders, passThrough, upstreamRequestHeaders } from "./proxy.ts";
import { withStreamUsage } from "./stream_usage.ts";
import { SystemdUnit } from "./systemd.ts";
import { type ModelApi, UpstreamClient, type UpstreamModel } from "./upstream.ts";
import { wrapUpstreamError } from "./upstream_error.ts";

const POLL_READY_MS = 5_000;
const BACKOFF_FIRST_MS = 200;
const BACKOFF_MAX_MS = 5_000;
/** As long as the gateway waits for a load. */
const LOAD_TIMEOUT_MS = 1_800_000;
/** llama-server force-kills an instance 10 s after asking it to stop; this leaves margin. */
const UNLOAD_TIMEOUT_MS = 60_000;
const SETTLE_POLL_MAX_MS = 2_000;

type State = "starting" | "ready" | "down";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

/**
 * An OpenAI-compatible server (mistral.rs, llama-server, vLLM) run beside neuron, optionally
 * as a systemd unit that neuron starts and stops. Its models come from its own /v1/models;
 * loads and unloads go through whichever management API that listing shows (mistral.rs or
 * llama-server's router, see upstream.ts). /v1/* requests are relayed byte for byte,
 * streams included, without buffering; the only rewrite asks a stream for its usage chunk,
 * and an upstream's error answer is put in neuron's envelope.
 */
export class ExternalHarness implements Harness {
  readonly name: string;
  readonly kind: HarnessKind = "external";
  readonly #upstream: UpstreamClient;
  readonly #unit: SystemdUnit | null;
  readonly #startTimeoutMs: number;
  readonly #ctx: HarnessContext;
  readonly #log;
  #state: State = "starting";
  #detail = "not contacted yet";
  #models = new Map<string, UpstreamModel>();
  #api: ModelApi = "none";
  #inFlight = new Map<string, number>();
  #starting: Promise<void> | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #polling: Promise<void> | null = null;
  readonly #closing = new AbortController();

  constructor(entry: HarnessEntry, systemctl: string, ctx: HarnessContext) {
    if (!entry.endpoint) throw new Error(`external harness ${entry.name} has no endpoint`);
    this.name = entry.name;
    this.#upstream = new UpstreamClient(entry.endpoint, entry.health_path);
    this.#unit = entry.systemd_unit ? new SystemdUnit(systemctl, entry.systemd_unit) : null;
    this.#startTimeoutMs = entry.start_timeout_secs * 1000;
    this.#ctx = ctx;
    this.#log = log.child({ harness: entry.name });
  }

  start(): void {
    this.#ensureUp().catch((err) => this.#log.warn("upstream not available", { error: err }));
  }

  /** Starts the unit if needed and waits until the upstream answers its health route. */
  #ensureUp(): Promise<void> {
    if (this.#state === "ready") return Promise.resolve();
    this.#starting ??= this.#bringUp().finally(() => {
      this.#starting = null;
    });
    return this.#starting;
  }

  async #bringUp(): Promise<void> {
    if (this.#unit && !(await this.#upstream.healthy(1000))) {
      this.#log.info("starting unit", { unit: this.#unit.unit });
      await this.#unit.start();
    }
    const deadline = Date.now() + this.#startTimeoutMs;
    let wait = BACKOFF_FIRST_MS;
    while (!this.#closing.signal.aborted) {
      if (await this.#upstream.healthy(undefined, this.#closing.signal)) {
        await this.#refresh();
        if (this.#state === "ready") {
          this.#schedulePoll(POLL_READY_MS);
          return;
        }
      }
      if (Date.now() + wait > deadline) break;
      await sleep(wait, this.#closing.signal);
      wait = Math.min(wait * 2, BACKOFF_MAX_MS);
    }
    this.#markDown(`${this.#upstream.base} did not become healthy`);
    this.#schedulePoll(BACKOFF_MAX_MS);
    throw new HarnessError(
      "harness_unavailable",
      `harness ${this.name}: ${this.#upstream.base} is not reachable (${this.#detail})`,
      { retryAfter: 10 },
    );
  }

  /** Re-reads the model list; the state follows what it finds. */
  async #refresh(): Promise<void> {
    try {
      const { api, models } = await this.#upstream.models();
      this.#models = new Map(models.map((m) => [m.id, m]));
      this.#api = api;
      if (this.#state !== "ready") this.#log.info("upstream ready", { models: models.length });
      this.#state = "ready";
      this.#detail = "";
    } catch (err) {
      this.#markDown(errorMessage(err));
    }
  }

  #markDown(detail: string): void {
    if (this.#state === "ready") this.#log.warn("upstream down", { detail });
    this.#state = "down";
    this.#detail = detail;
  }

  /** Background polling: every few seconds when up, with backoff while down. */
  #schedulePoll(delay: number): void {
    if (this.#closing.signal.aborted) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#polling = (async () => {
        if (await this.#upstream.healthy(undefined, this.#closing.signal)) await this.#refresh();
        else this.#markDown(`${this.#upstream.base}: health check failed`);
        this.#schedulePoll(
          this.#state === "ready"
            ? POLL_READY_MS
            : Math.min(Math.max(delay * 2, 500), BACKOFF_MAX_MS),
        );
      })();
    }, delay);
  }

  health(): HarnessHealth {
    return {
      name: this.name,
      kind: this.kind,
      state: this.#state,
      detail: this.#detail || undefined,
      models: [...this.#models.values()]
        .filter((m) => this.#status(m) === "loaded")
        .map((m) => ({
          id: m.id,
          in_flight: this.#inFlight.get(m.id) ?? 0,
          queue_depth: 0,
          tok_s_prefill: 0,
          tok_s_decode: 0,
        })),
    };
  }

  #status(m: UpstreamModel): ModelStatus {
    return this.#state === "ready" ? m.state : "recovering";
  }

  list(): ModelInfo[] {
    return [...this.#models.values()].map((m) => {
      const status = this.#status(m);
      const info: ModelInfo = {
        id: m.id,
        harness: this.name,
        status,
        devices: [],
        vram_used_mb: null,
        capabilities: ["text"],
      };
      if (m.max_model_len) info.limit = { context: m.max_model_len };
      if (status === "recovering") {
        info.servable = { ok: false, reason: "harness_unavailable", detail: this.#detail };
      }
      if (status === "failed") {
        info.error = m.detail;
        info.servable = { ok: false, reason: "load_failed", detail: m.detail };
      }
      return info;
    });
  }

  async load(spec: ModelSpec): Promise<void> {
    if (spec.served_name) {
      // Relayed bodies name the upstream's model; an alias would mean rewriting them.
      throw new HarnessError(
        "served_name_unsupported",
        `harness ${this.name}: served_name is for the native harness; name the model as ` +
          "the upstream does",
      );
    }
    if (spec.speculative || spec.draft_model) {
      throw new HarnessError(
        "speculative_unsupported",
        `harness ${this.name}: speculative and draft_model are for the native harness; ` +
          "configure speculation " +
          "on the upstream server",
      );
    }
    await this.#ensureUp();
    const id = spec.model_id;
    const api = this.#api;
    if (api === "none") {
      throw new HarnessError(
        "model_not_found",
        `harness ${this.name}: ${this.#upstream.base} does not serve ${id} and cannot load ` +
          `models (it serves: ${[...this.#models.keys()].join(", ") || "nothing"})`,
      );
    }
    this.#log.info("loading through upstream", { model: id, api });
    const answer = await this.#upstream.manage(api, "load", id);
    if (answer.status === 404) {
      throw new HarnessError("model_not_found", `${this.#upstream.base}: ${answer.message}`);
    }
    if (answer.status >= 400) await this.#refusedUnless(answer, id, ["loaded", "loading"]);
    const m = await this.#settle(id, (m) => m?.state !== "loading", LOAD_TIMEOUT_MS, "load");
    if (!m || m.state !== "loaded") {
      throw new HarnessError(
        "model_load_failed",
        `${this.#upstream.base} did not load ${id}: ${m?.detail ?? `it is ${m?.state ?? "gone"}`}`,
      );
    }
  }

  async unload(id: string): Promise<void> {
    if (!this.#models.has(id)) {
      throw new HarnessError("model_not_found", `model ${id} is not loaded`);
    }
    const api = this.#api;
    if (api === "none") {
      throw new HarnessError(
        "unload_unsupported",
        `harness ${this.name}: this upstream (${this.#upstream.base}) cannot unload models; ` +
          "its /v1/models reports no load state, as servers that always serve what they " +
          "started with do (vLLM, llama-server outside router mode)",
      );
    }
    const answer = await this.#upstream.manage(api, "unload", id);
    if (answer.status === 404) {
      throw new HarnessError("model_not_found", `${this.#upstream.base}: ${answer.message}`);
    }
    // llama-server refuses (400) to unload what is not running: already where we want it.
    if (answer.status >= 400) await this.#refusedUnless(answer, id, ["unloaded", "failed"]);
    await this.#settle(
      id,
      (m) => m?.state !== "loaded" && m?.state !== "loading",
      UNLOAD_TIMEOUT_MS,
      "unload",
    );
  }

  /** A refused load or unload is an error unless the model is already in one of `fine`. */
  async #refusedUnless(
    answer: { status: number; message: string },
    id: string,
    fine: UpstreamModel["state"][],
  ): Promise<void> {
    await this.#refresh();
    const m = this.#models.get(id);
    if (!m) throw new HarnessError("model_not_found", `${this.#upstream.base}: ${answer.message}`);
    if (fine.includes(m.state)) return;
    throw new HarnessError(
      "upstream_error",
      `${this.#upstream.base} answered ${answer.status}: ${answer.message}`,
    );
  }

  /**
   * Re-reads the listing until `settled` holds for the model (absent: undefined), for
   * upstreams whose loads and unloads finish after they answer; an upstream_error past the
   * deadline.
   */
  async #settle(
    id: string,
    settled: (m: UpstreamModel | undefined) => boolean,
    timeoutMs: number,
    what: string,
  ): Promise<UpstreamModel | undefined> {
    const deadline = Date.now() + timeoutMs;
    let wait = 50;
    for (;;) {
      await this.#refresh();
      if (this.#state !== "ready") {
        throw new HarnessError(
          "harness_unavailable",
          `harness ${this.name}: lost the upstream during the ${what} of ${id}: ${this.#detail}`,
          { retryAfter: 10 },
        );
      }
      const m = this.#models.get(id);
      if (settled(m)) return m;
      if (this.#closing.signal.aborted || Date.now() + wait > deadline) {
        throw new HarnessError(
          "upstream_error",
          `${this.#upstream.base}: the ${what} of ${id} did not finish in ${timeoutMs / 1000} s`,
        );
      }
      await sleep(wait, this.#closing.signal);
      wait = Math.min(wait * 2, SETTLE_POLL_MAX_MS);
    }
  }

  has(id: string): boolean {
    return this.#models.has(id);
  }

  endpoint(id: string): string | null {
    const m = this.#models.get(id);
    return m && this.#status(m) === "loaded" ? this.#ctx.selfUrl() : null;
  }

  async serve(call: InferenceCall): Promise<Response> {
    if (this.#state === "down") {
      throw new HarnessError(
        "harness_unavailable",
        `harness ${this.name} is down: ${this.#detail}`,
        { retryAfter: 5 },
      );
    }
    let res: Response;
    try {
      res = await fetch(`${this.#upstream.base}/v1/${call.route}`, {
        method: "POST",
        headers: upstreamRequestHeaders(call.headers),
        // The Responses API always ends its stream with usage; the other routes need asking
        // when they stream (embeddings and rerank never do: their bodies pass unchanged).
        body: call.route === "responses" ? call.body : withStreamUsage(call.body, call.json),
        signal: call.signal,
        redirect: "manual",
      });
    } catch (err) {
      if (call.signal.aborted) throw err;
      this.#markDown(errorMessage(err));
      this.#schedulePoll(BACKOFF_FIRST_MS);
      throw new HarnessError(
        "harness_unavailable",
        `harness ${this.name} is unreachable: ${errorMessage(err)}`,
        { cause: err, retryAfter: 5 },
      );
    }
    if (res.status >= 400) return await wrapUpstreamError(res, this.name);
    this.#inFlight.set(call.model, (this.#inFlight.get(call.model) ?? 0) + 1);
    const body = passThrough(res.body, () => {
      this.#inFlight.set(call.model, (this.#inFlight.get(call.model) ?? 1) - 1);
    });
    return new Response(body, {
      status: res.status,
      statusText: res.statusText,
      headers: clientResponseHeaders(res.headers),
    });
  }

  async close(): Promise<void> {
    this.#closing.abort();
    clearTimeout(this.#timer);
    await this.#starting?.catch(() => {});
    await this.#polling;
    if (this.#unit) {
      this.#log.info("stopping unit", { unit: this.#unit.unit });
      await this.#unit.stop();
    }
  }
}
