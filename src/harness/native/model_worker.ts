/// <reference lib="deno.worker" />
/**
 * The entry point of a model's Worker. It owns one ModelSession, answers the host's
 * messages (protocol.ts) and keeps stepping while there is work, yielding between steps
 * so a cancel or a new request is seen within one token.
 *
 * The front end (templates, tokenizing, detokenizing, parsing) runs here, beside the
 * engine core, rather than on the HTTP thread: the HTTP thread serves every model and the
 * gateway's polls, and a slow or runaway template there would stall them all; here it
 * delays one model's steps, and a stuck Worker can be terminated.
 */

import { errorMessage, NeuronError } from "../../common/errors.ts";
import { log } from "../../common/log.ts";
import type { GenerationEvent } from "../../frontend/mod.ts";
import { ModelSession } from "./model_session.ts";
import type { HostMessage, WorkerMessage } from "./protocol.ts";
import { Doorbell, isUrgent, yieldToEventLoop } from "./yield.ts";

let session: ModelSession | null = null;
let stepping = false;
let doorbell: Doorbell | null = null;
let received = 0;
/** Urgent messages received (Doorbell.ring): a prefill step stops when more were posted. */
let receivedUrgent = 0;

function send(message: WorkerMessage): void {
  self.postMessage(message);
}

function codeOf(err: unknown): string {
  return err instanceof NeuronError ? err.code : "internal_error";
}

async function run(): Promise<void> {
  if (stepping) return;
  stepping = true;
  try {
    while (session?.hasWork) {
      try {
        session.step(doorbell ? { word: doorbell.urgent, seen: receivedUrgent } : undefined);
      } catch (err) {
        // A failed forward pass fails the requests in flight, not the worker.
        log.error("engine step failed", { error: errorMessage(err) });
        session.failAll(codeOf(err), errorMessage(err));
      }
      await yieldToEventLoop(doorbell, () => received);
    }
  } finally {
    stepping = false;
  }
}

self.onmessage = (e: MessageEvent<HostMessage>): void => {
  const msg = e.data;
  received++;
  if (isUrgent(msg)) receivedUrgent++;
  switch (msg.op) {
    case "load":
      doorbell = new Doorbell(msg.doorbell);
      try {
        session = ModelSession.open(msg.options);
        send({ op: "loaded", description: session.description });
      } catch (err) {
        send({ op: "load_failed", code: codeOf(err), message: errorMessage(err) });
      }
      return;
    case "generate": {
      const id = msg.request.id;
      if (session === null) {
        send({ op: "rejected", id, code: "engine_closed", message: "model not loaded" });
        return;
      }
      const sink = (event: GenerationEvent): void => send({ op: "event", id, event });
      // A long prompt is tokenized a slice at a time, steps and messages running between.
      const pause = () => yieldToEventLoop(doorbell, () => received);
      session.submit(msg.request, sink, pause).then(
        (promptTokens) => {
          send({ op: "accepted", id, promptTokens });
          run();
        },
        (err) => send({ op: "rejected", id, code: codeOf(err), message: errorMessage(err) }),
      );
      return;
    }
    case "pool": {
      const id = msg.request.id;
      if (session === null) {
        send({ op: "rejected", id, code: "engine_closed", message: "model not loaded" });
        return;
      }
      const pause = () => yieldToEventLoop(doorbell, () => received);
      session.pool(msg.request, pause).then(
        ({ result }) => {
          run();
          result.then(
            (r) => send({ op: "pooled", id, result: r }),
            (err) => send({ op: "pool_failed", id, code: codeOf(err), message: errorMessage(err) }),
          );
        },
        (err) => send({ op: "rejected", id, code: codeOf(err), message: errorMessage(err) }),
      );
      return;
    }
    case "cancel":
      session?.cancel(msg.id);
      return;
    case "stats":
      if (session) send({ op: "stats", tag: msg.tag, stats: session.stats() });
      return;
    case "close":
      session?.close();
      session = null;
      send({ op: "closed" });
      return;
  }
};
