/**
 * The HTTP thread's handle on a model's Worker (model_worker.ts): starts it, sends
 * requests and turns the Worker's events back into one async stream per request. Nothing
 * here computes; everything heavy happens in the Worker.
 */

import { errorMessage, NeuronError } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { EngineStats } from "../../engine/mod.ts";
import type {
  GenerateRequest,
  GenerationEvent,
  GenerationFault,
  PoolRequest,
  PoolResult,
} from "../../frontend/mod.ts";
import type { ModelDescription } from "./describe.ts";
import { ModelGoneError, PoolFailedError } from "./errors.ts";
import type { ModelLoadOptions } from "./model_session.ts";
import type { HostMessage, WorkerMessage } from "./protocol.ts";
import { Doorbell, isUrgent } from "./yield.ts";

/** Codes of a request refused before it was queued that the server maps as they are. */
const REQUEST_CODES: ReadonlySet<string> = new Set([
  "invalid_request",
  "context_length_exceeded",
  "template_unavailable",
  "template_render_failed",
  "chat_template_failed",
  "engine_closed",
]);

/**
 * A request the model refused before it ran, keeping the refusal's own code where it is a
 * request's fault (e.g. context_length_exceeded); other codes become invalid_request.
 */
export class ModelRequestError extends NeuronError {
  constructor(reportedCode: string, message: string) {
    super(REQUEST_CODES.has(reportedCode) ? reportedCode : "invalid_request", message);
  }
}

/** The model could not be loaded; `code` is the loader's (e.g. gguf_truncated). */
export class ModelLoadError extends NeuronError {}

/** The events of one request, in order, ending with the `done` of its last choice. */
export class GenerationStream implements AsyncIterable<GenerationEvent> {
  readonly #queue: GenerationEvent[] = [];
  #wake: (() => void) | null = null;
  #ended = false;
  /** Choices still to end. */
  #open: number;
  /** Tokens seen, for the usage of an end the Worker could not report (it died). */
  #completion = 0;
  #reasoning = 0;

  constructor(
    readonly id: string,
    readonly promptTokens: number,
    private readonly onCancel: () => void,
    /** Choices the request generates, each ending with its own `done`. */
    choices = 1,
  ) {
    this.#open = choices;
  }

  /** Whether every choice has ended. */
  get ended(): boolean {
    return this.#ended;
  }

  push(event: GenerationEvent): void {
    if (this.#ended) return;
    if (event.type === "delta") {
      this.#completion += event.tokens.length;
      if (event.reasoning && !event.content) this.#reasoning += event.tokens.length;
    }
    this.#queue.push(event);
    if (event.type === "done" && --this.#open === 0) this.#ended = true;
    this.#wake?.();
  }

  /** Ends the stream (every choice still open) with `fault`, the usage counted from what it saw. */
  fail(fault: GenerationFault): void {
    if (this.#ended) return;
    this.#open = 1;
    this.push({
      type: "done",
      finishReason: "error",
      usage: {
        promptTokens: this.promptTokens,
        completionTokens: this.#completion,
        cachedTokens: 0,
        reasoningTokens: this.#reasoning,
      },
      fault,
    });
  }

  /** Stops generation; the stream then ends with a `done` of reason `cancelled`. */
  cancel(): void {
    if (!this.#ended) this.onCancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<GenerationEvent> {
    while (true) {
      const event = this.#queue.shift();
      if (event !== undefined) {
        yield event;
        if (this.#ended && this.#queue.length === 0) return;
        continue;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
  }
}

interface Pending {
  accept: (stream: GenerationStream) => void;
  reject: (err: Error) => void;
  choices: number;
}

interface PendingPool {
  resolve: (result: PoolResult) => void;
  reject: (err: Error) => void;
}

export class ModelHost {
  readonly #worker: Worker;
  readonly #doorbell = new Doorbell();
  readonly #streams = new Map<string, GenerationStream>();
  readonly #pending = new Map<string, Pending>();
  readonly #pools = new Map<string, PendingPool>();
  readonly #statsWaiters = new Map<number, (stats: EngineStats) => void>();
  #statsTag = 0;
  #closed: (() => void) | null = null;
  #dead: Error | null = null;
  #description: ModelDescription | null = null;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  /** Starts a Worker and loads the model in it; rejects with the load error. */
  static start(options: ModelLoadOptions): Promise<ModelHost> {
    const worker = new Worker(new URL("./model_worker.ts", import.meta.url), { type: "module" });
    const host = new ModelHost(worker);
    return new Promise((resolve, reject) => {
      let loading = true;
      worker.onmessage = (e: MessageEvent<WorkerMessage>) => {
        const msg = e.data;
        if (loading && msg.op === "loaded") {
          loading = false;
          host.#description = msg.description;
          resolve(host);
        } else if (loading && msg.op === "load_failed") {
          loading = false;
          worker.terminate();
          reject(new ModelLoadError(msg.code, msg.message));
        } else {
          host.#onMessage(msg);
        }
      };
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        const err = new ModelGoneError("engine_crashed", `model worker crashed: ${e.message}`);
        if (loading) {
          loading = false;
          worker.terminate();
          reject(err);
        } else {
          host.#die(err);
        }
      };
      host.#post({ op: "load", options, doorbell: host.#doorbell.buffer });
    });
  }

  get description(): ModelDescription {
    return this.#description!;
  }

  get alive(): boolean {
    return this.#dead === null;
  }

  /** Requests in flight (accepted, not finished). */
  get inFlight(): number {
    return this.#streams.size;
  }

  /**
   * Submits a request; resolves once the model accepted it (prompt rendered, tokenized,
   * fits), rejects with its error otherwise.
   */
  generate(request: GenerateRequest): Promise<GenerationStream> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((accept, reject) => {
      this.#pending.set(request.id, { accept, reject, choices: Math.max(1, request.n ?? 1) });
      this.#post({ op: "generate", request });
    });
  }

  /**
   * Runs a pooling request (embeddings, rerank scores); a signal that fires cancels it.
   * Rejects with the refusal (ModelRequestError) or the engine's failure (PoolFailedError).
   */
  pool(request: PoolRequest, signal?: AbortSignal): Promise<PoolResult> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      const onAbort = (): void => this.#post({ op: "cancel", id: request.id });
      signal?.addEventListener("abort", onAbort, { once: true });
      const settled = <T>(f: (v: T) => void) => (v: T): void => {
        signal?.removeEventListener("abort", onAbort);
        this.#pools.delete(request.id);
        f(v);
      };
      this.#pools.set(request.id, { resolve: settled(resolve), reject: settled(reject) });
      this.#post({ op: "pool", request });
    });
  }

  stats(): Promise<EngineStats> {
    if (this.#dead) return Promise.reject(this.#dead);
    const tag = ++this.#statsTag;
    return new Promise((resolve) => {
      this.#statsWaiters.set(tag, resolve);
      this.#post({ op: "stats", tag });
    });
  }

  /** Cancels everything, frees the model and stops the Worker. */
  async close(): Promise<void> {
    if (this.#dead === null) {
      const closed = new Promise<void>((resolve) => (this.#closed = resolve));
      this.#post({ op: "close" });
      await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
    }
    this.#worker.terminate();
    this.#die(new ModelGoneError("engine_closed", "the model was unloaded"));
  }

  #post(message: HostMessage): void {
    this.#doorbell.ring(isUrgent(message));
    this.#worker.postMessage(message);
  }

  #onMessage(msg: WorkerMessage): void {
    switch (msg.op) {
      case "accepted": {
        const pending = this.#pending.get(msg.id);
        if (!pending) return;
        this.#pending.delete(msg.id);
        const stream = new GenerationStream(
          msg.id,
          msg.promptTokens,
          () => this.#post({ op: "cancel", id: msg.id }),
          pending.choices,
        );
        this.#streams.set(msg.id, stream);
        pending.accept(stream);
        return;
      }
      case "rejected": {
        const err = new ModelRequestError(msg.code, msg.message);
        (this.#pending.get(msg.id) ?? this.#pools.get(msg.id))?.reject(err);
        this.#pending.delete(msg.id);
        return;
      }
      case "event": {
        const stream = this.#streams.get(msg.id);
        if (!stream) {
          // The Worker accepts a request before its first event and ends it with its last:
          // an event with nowhere to go is a broken promise of the protocol, never normal.
          log.warn("model worker event for a request not in flight", { id: msg.id });
          return;
        }
        stream.push(msg.event);
        if (stream.ended) this.#streams.delete(msg.id);
        return;
      }
      case "pooled":
        this.#pools.get(msg.id)?.resolve(msg.result);
        return;
      case "pool_failed":
        this.#pools.get(msg.id)?.reject(new PoolFailedError(msg.code, msg.message));
        return;
      case "stats":
        this.#statsWaiters.get(msg.tag)?.(msg.stats);
        this.#statsWaiters.delete(msg.tag);
        return;
      case "closed":
        this.#closed?.();
        return;
      default:
        log.warn("unexpected model worker message", { op: msg.op });
    }
  }

  #die(err: Error): void {
    if (this.#dead) return;
    this.#dead = err;
    const code = err instanceof NeuronError ? err.code : "engine_crashed";
    for (const p of [...this.#pending.values(), ...this.#pools.values()]) p.reject(err);
    this.#pending.clear();
    this.#pools.clear();
    for (const [id, s] of this.#streams) {
      s.fail({ code, message: errorMessage(err) });
      this.#streams.delete(id);
    }
  }
}
