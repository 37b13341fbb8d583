/**
 * What a model's Worker does with the host's messages (protocol.ts): it owns one
 * ModelSession, answers each message and keeps stepping while there is work, yielding
 * between steps so that a cancel or a new request is seen within one token. The Worker
 * entry (model_worker.ts) only wires this to `self`; tests drive it directly, with their
 * own yield, to put its steps where they choose.
 */

import { errorMessage, NeuronError } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { GenerationEvent } from "../../frontend/mod.ts";
import { ModelSession } from "./model_session.ts";
import type { HostMessage, WorkerMessage } from "./protocol.ts";
import { Doorbell, isUrgent, yieldToEventLoop } from "./yield.ts";

/** Lets messages in between two steps (yield.ts's, unless a test brings its own). */
export type StepYield = (doorbell: Doorbell | null, received: () => number) => Promise<void>;

function codeOf(err: unknown): string {
  return err instanceof NeuronError ? err.code : "internal_error";
}

export class WorkerLoop {
  #session: ModelSession | null = null;
  #stepping = false;
  #doorbell: Doorbell | null = null;
  #received = 0;
  /** Urgent messages received (Doorbell.ring): a prefill step stops when more were posted. */
  #receivedUrgent = 0;

  constructor(
    private readonly send: (message: WorkerMessage) => void,
    private readonly stepYield: StepYield = yieldToEventLoop,
  ) {}

  /** Handles one message from the host. */
  onMessage(msg: HostMessage): void {
    this.#received++;
    if (isUrgent(msg)) this.#receivedUrgent++;
    const session = this.#session;
    switch (msg.op) {
      case "load":
        this.#doorbell = new Doorbell(msg.doorbell);
        try {
          this.#session = ModelSession.open(msg.options);
          this.send({ op: "loaded", description: this.#session.description });
        } catch (err) {
          this.send({ op: "load_failed", code: codeOf(err), message: errorMessage(err) });
        }
        return;
      case "generate": {
        const id = msg.request.id;
        if (session === null) return this.#reject(id, "engine_closed", "model not loaded");
        const sink = (event: GenerationEvent): void => this.send({ op: "event", id, event });
        // Accepted as it is queued: the host drops events of a request it has not seen
        // accepted, and a step can run between the queueing and a `.then` on the promise.
        const accepted = (promptTokens: number) => this.send({ op: "accepted", id, promptTokens });
        // A long prompt is tokenized a slice at a time, steps and messages running between.
        session.submit(msg.request, sink, this.#pause, accepted).then(
          () => this.#run(),
          (err) => this.#reject(id, codeOf(err), errorMessage(err)),
        );
        return;
      }
      case "pool": {
        const id = msg.request.id;
        if (session === null) return this.#reject(id, "engine_closed", "model not loaded");
        session.pool(msg.request, this.#pause).then(
          ({ result }) => {
            this.#run();
            result.then(
              (r) => this.send({ op: "pooled", id, result: r }),
              (err) =>
                this.send({ op: "pool_failed", id, code: codeOf(err), message: errorMessage(err) }),
            );
          },
          (err) => this.#reject(id, codeOf(err), errorMessage(err)),
        );
        return;
      }
      case "cancel":
        session?.cancel(msg.id);
        return;
      case "stats":
        if (session) this.send({ op: "stats", tag: msg.tag, stats: session.stats() });
        return;
      case "close":
        session?.close();
        this.#session = null;
        this.send({ op: "closed" });
        return;
    }
  }

  /** Refuses a request before anything of it was queued. */
  #reject(id: string, code: string, message: string): void {
    this.send({ op: "rejected", id, code, message });
  }

  #pause = (): Promise<void> => this.stepYield(this.#doorbell, () => this.#received);

  async #run(): Promise<void> {
    if (this.#stepping) return;
    this.#stepping = true;
    try {
      while (this.#session?.hasWork) {
        const session = this.#session;
        const doorbell = this.#doorbell;
        try {
          session.step(
            doorbell ? { word: doorbell.urgent, seen: this.#receivedUrgent } : undefined,
          );
        } catch (err) {
          // A failed forward pass fails the requests in flight, not the worker.
          log.error("engine step failed", { error: errorMessage(err) });
          session.failAll(codeOf(err), errorMessage(err));
        }
        await this.#pause();
      }
    } finally {
      this.#stepping = false;
    }
  }
}
