/**
 * How the engine Worker lets messages in between steps.
 *
 * Measured in Deno 2.9: a Worker that yields with MessageChannel round trips (~20 µs)
 * does not see messages from its host for hundreds of milliseconds, while `setTimeout(0)`
 * delivers them at once but costs ~2 ms per yield. So the host rings a doorbell in shared
 * memory for every message it posts, and the Worker takes the slow yield only while it
 * has received fewer messages than were posted: a cancel or a new request is seen after
 * at most one step, and an undisturbed decode loop pays ~20 µs per step.
 */

import type { HostMessage } from "./protocol.ts";

/** Messages a prefill step in flight stops for: everything but a stats poll. */
export function isUrgent(message: HostMessage): boolean {
  return message.op !== "stats";
}

/**
 * Counters of posted messages shared by the host and its Worker: all of them, and the
 * urgent ones (a new request, a cancel, a close), which a prefill step in flight watches so
 * that it can stop for them (engine.ts).
 */
export class Doorbell {
  readonly buffer: SharedArrayBuffer;
  readonly #count: Int32Array;
  /** The count of urgent messages, as the one word a native step loop can watch. */
  readonly urgent: Int32Array;

  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.buffer = buffer;
    this.#count = new Int32Array(buffer, 0, 1);
    this.urgent = new Int32Array(buffer, 4, 1);
  }

  /** Host: call once before each postMessage to the Worker. */
  ring(urgent: boolean): void {
    if (urgent) Atomics.add(this.urgent, 0, 1);
    Atomics.add(this.#count, 0, 1);
  }

  get posted(): number {
    return Atomics.load(this.#count, 0);
  }
}

const channel = new MessageChannel();
const waiting: Array<() => void> = [];
channel.port1.onmessage = () => waiting.shift()?.();
// The channel must not keep a finished worker or test alive.
(channel.port1 as unknown as { unref?: () => void }).unref?.();

function quickYield(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(0);
  });
}

/** Slow yields in a row while a posted message is still on its way. */
const MAX_SLOW_YIELDS = 8;

/**
 * Worker side: yields so that every message posted so far gets delivered. The host rings
 * before it posts, so a message can still be on its way when the ring is seen (a prefill
 * step stopped for it returns within microseconds): the slow yield repeats, a few times at
 * most, until `received()` has caught up.
 */
export async function yieldToEventLoop(
  doorbell: Doorbell | null,
  received: () => number,
): Promise<void> {
  if (doorbell === null || doorbell.posted <= received()) return quickYield();
  for (let i = 0; i < MAX_SLOW_YIELDS && doorbell.posted > received(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}
