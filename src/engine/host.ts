/**
 * The HTTP thread's handle on a model's engine Worker: starts it, sends requests and
 * turns the Worker's events back into one async stream per request. Nothing here
 * computes; everything heavy happens in the Worker.
 */

import { errorMessage, NeuronError } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { EngineError, type EngineErrorCode } from "./errors.ts";
import type {
  EngineEvent,
  EngineOptions,
  EngineStats,
  GenerateRequest,
  HostMessage,
  ModelDescription,
  WorkerMessage,
} from "./protocol.ts";
import { Doorbell, isUrgent } from "./yield.ts";

/** A failure reported by the engine, keeping the engine's code (e.g. context_length_exceeded). */
export class EngineRequestError extends EngineError {
  constructor(readonly engineCode: string, message: string) {
    super(isEngineCode(engineCode) ? engineCode : "invalid_request", message);
  }
}

const ENGINE_CODES: ReadonlySet<string> = new Set<EngineErrorCode>([
  "invalid_request",
  "context_length_exceeded",
  "template_unavailable",
  "template_render_failed",
  "engine_closed",
  "engine_crashed",
]);

function isEngineCode(code: string): code is EngineErrorCode {
  return ENGINE_CODES.has(code);
}

/** The events of one request, in order, ending with `done` or `error`. */
export class GenerationStream implements AsyncIterable<EngineEvent> {
  readonly #queue: EngineEvent[] = [];
  #wake: (() => void) | null = null;
  #ended = false;

  constructor(
    readonly id: string,
    readonly promptTokens: number,
    private readonly onCancel: () => void,
  ) {}

  push(event: EngineEvent): void {
    if (this.#ended) return;
    this.#queue.push(event);
    if (event.type === "done" || event.type === "error") this.#ended = true;
    this.#wake?.();
  }

  /** Stops generation; the stream then ends with a `done` of reason `cancelled`. */
  cancel(): void {
    if (!this.#ended) this.onCancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<EngineEvent> {
    while (true) {
      const event = this.#queue.shift();
      if (event !== undefined) {
        yield event;
        if (event.type === "done" || event.type === "error") return;
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
}

export class EngineHost {
  readonly #worker: Worker;
  readonly #doorbell = new Doorbell();
  readonly #streams = new Map<string, GenerationStream>();
  readonly #pending = new Map<string, Pending>();
  readonly #statsWaiters = new Map<number, (stats: EngineStats) => void>();
  #statsTag = 0;
  #closed: (() => void) | null = null;
  #dead: Error | null = null;
  #description: ModelDescription | null = null;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  /** Starts a Worker and loads the model in it; rejects with the load error. */
  static start(options: EngineOptions): Promise<EngineHost> {
    const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
    const host = new EngineHost(worker);
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
          reject(new EngineLoadError(msg.code, msg.message));
        } else {
          host.#onMessage(msg);
        }
      };
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        const err = new EngineError("engine_crashed", `engine worker crashed: ${e.message}`);
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
   * Submits a request; resolves once the engine accepted it (prompt rendered, tokenized,
   * fits), rejects with the engine's error otherwise.
   */
  generate(request: GenerateRequest): Promise<GenerationStream> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((accept, reject) => {
      this.#pending.set(request.id, { accept, reject });
      this.#post({ op: "generate", request });
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
    this.#die(new EngineError("engine_closed", "the model was unloaded"));
  }

  #post(message: HostMessage): void {
    this.#doorbell.ring(isUrgent(message));
    this.#worker.postMessage(message);
  }

  #onMessage(msg: WorkerMessage): void {
    switch (msg.op) {
      case "event":
        this.#onEvent(msg.event);
        return;
      case "stats":
        this.#statsWaiters.get(msg.tag)?.(msg.stats);
        this.#statsWaiters.delete(msg.tag);
        return;
      case "closed":
        this.#closed?.();
        return;
      default:
        log.warn("unexpected engine message", { op: msg.op });
    }
  }

  #onEvent(event: EngineEvent): void {
    const pending = this.#pending.get(event.id);
    if (pending) {
      this.#pending.delete(event.id);
      if (event.type === "accepted") {
        const stream = new GenerationStream(
          event.id,
          event.promptTokens,
          () => this.#post({ op: "cancel", id: event.id }),
        );
        this.#streams.set(event.id, stream);
        pending.accept(stream);
      } else if (event.type === "error") {
        pending.reject(new EngineRequestError(event.code, event.message));
      }
      return;
    }
    const stream = this.#streams.get(event.id);
    if (!stream) return;
    stream.push(event);
    if (event.type === "done" || event.type === "error") this.#streams.delete(event.id);
  }

  #die(err: Error): void {
    if (this.#dead) return;
    this.#dead = err;
    const code = err instanceof EngineError ? err.code : "engine_crashed";
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
    for (const [id, s] of this.#streams) {
      s.push({ type: "error", id, code, message: errorMessage(err) });
    }
    this.#streams.clear();
  }
}

/** The model could not be loaded; `code` is the loader's (e.g. gguf_truncated). */
export class EngineLoadError extends NeuronError {}
