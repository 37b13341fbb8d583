/**
 * Lets queued messages (a cancel, a new request) run between engine steps. A
 * MessageChannel round trip takes ~20 µs; `setTimeout(0)` is clamped to milliseconds
 * once nested, which would add a millisecond or more to every token.
 */

const channel = new MessageChannel();
const waiting: Array<() => void> = [];
channel.port1.onmessage = () => waiting.shift()?.();
// The channel must not keep a finished worker or test alive.
(channel.port1 as unknown as { unref?: () => void }).unref?.();

export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(0);
  });
}
