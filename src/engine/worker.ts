/// <reference lib="deno.worker" />
/**
 * The entry point of a model's engine Worker. It owns one Engine, answers the host's
 * messages (protocol.ts) and keeps stepping while there is work, yielding between steps
 * so a cancel or a new request is seen within one token.
 */

import { errorMessage, NeuronError } from "../common/errors.ts";
import { log } from "../common/log.ts";
import { Engine } from "./engine.ts";
import type { EngineEvent, HostMessage, WorkerMessage } from "./protocol.ts";
import { Doorbell, isUrgent, yieldToEventLoop } from "./yield.ts";

let engine: Engine | null = null;
let stepping = false;
let doorbell: Doorbell | null = null;
let received = 0;
/** Urgent messages received (Doorbell.ring): a prefill step stops when more were posted. */
let receivedUrgent = 0;

function send(message: WorkerMessage): void {
  self.postMessage(message);
}

function emit(event: EngineEvent): void {
  send({ op: "event", event });
}

function codeOf(err: unknown): string {
  return err instanceof NeuronError ? err.code : "internal_error";
}

async function run(): Promise<void> {
  if (stepping) return;
  stepping = true;
  try {
    while (engine?.hasWork) {
      try {
        engine.step(doorbell ? { word: doorbell.urgent, seen: receivedUrgent } : undefined);
      } catch (err) {
        // A failed forward pass fails the requests in flight, not the worker.
        log.error("engine step failed", { error: errorMessage(err) });
        engine.failAll(codeOf(err), errorMessage(err));
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
        engine = Engine.open(msg.options);
        send({ op: "loaded", description: engine.description });
      } catch (err) {
        send({ op: "load_failed", code: codeOf(err), message: errorMessage(err) });
      }
      return;
    case "generate":
      if (engine === null) {
        emit({
          type: "error",
          id: msg.request.id,
          code: "engine_closed",
          message: "model not loaded",
        });
        return;
      }
      try {
        engine.submit(msg.request, emit);
      } catch (err) {
        emit({ type: "error", id: msg.request.id, code: codeOf(err), message: errorMessage(err) });
        return;
      }
      run();
      return;
    case "cancel":
      engine?.cancel(msg.id);
      return;
    case "stats":
      if (engine) send({ op: "stats", tag: msg.tag, stats: engine.stats() });
      return;
    case "close":
      engine?.close();
      engine = null;
      send({ op: "closed" });
      return;
  }
};
