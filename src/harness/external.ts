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
import { UpstreamClient, type UpstreamModel } from "./upstream.ts";
import { wrapUpstreamError } from "./upstream_error.ts";

const POLL_READY_MS = 5_000;
const BACKOFF_FIRST_MS = 200;
const BACKOFF_MAX_MS = 5_000;

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
 * loads and unloads use mistral.rs's /v1/models/{reload,unload}; /v1/* requests are relayed
 * byte for byte, streams included, without buffering.
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
      const models = await this.#upstream.models();
      this.#models = new Map(models.map((m) => [m.id, m]));
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
    if (this.#state !== "ready") return "recovering";
    if (m.status === "unloaded") return "unloaded";
    if (m.status === "reloading") return "loading";
    return "loaded";
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
      return info;
    });
  }

  async load(spec: ModelSpec): Promise<void> {
    await this.#ensureUp();
    this.#log.info("loading through upstream", { model: spec.model_id });
    await this.#upstream.modelOp("reload", spec.model_id);
    await this.#refresh();
    const m = this.#models.get(spec.model_id);
    if (!m || this.#status(m) !== "loaded") {
      throw new HarnessError(
        "upstream_error",
        `${this.#upstream.base} accepted the reload of ${spec.model_id} but does not list it as loaded`,
      );
    }
  }

  async unload(id: string): Promise<void> {
    if (!this.#models.has(id)) {
      throw new HarnessError("model_not_found", `model ${id} is not loaded`);
    }
    await this.#upstream.modelOp("unload", id);
    await this.#refresh();
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
        // The Responses API always ends its stream with usage; the other two need asking.
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
