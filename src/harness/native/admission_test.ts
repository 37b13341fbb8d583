import { assert, assertEquals, assertRejects } from "../../../tests/support/assert.ts";
import { Admission, AdmissionError } from "./admission.ts";

const live = () => new AbortController().signal;

Deno.test("admission: slots, FIFO queue, full queue, timeout, a waiter whose client left", async () => {
  const a = new Admission({ maxInFlight: 1, maxQueueDepth: 2, maxWaitSecs: 0.1 });
  const first = await a.acquire(live());
  const order: string[] = [];
  const b = a.acquire(live()).then((r) => (order.push("b"), r));
  const leaver = new AbortController();
  const c = a.acquire(leaver.signal);
  assertEquals([a.inFlight, a.queueDepth], [1, 2]);
  const full = await assertRejects(() => a.acquire(live()), AdmissionError);
  assertEquals(full.code, "rate_limit_exceeded");
  leaver.abort(new Error("gone"));
  await assertRejects(() => c);
  assertEquals(a.queueDepth, 1);
  first();
  first();
  const second = await b;
  assertEquals([order, a.inFlight, a.queueDepth], [["b"], 1, 0]);
  const late = await assertRejects(() => a.acquire(live()), AdmissionError);
  assertEquals(late.message.includes("waited 0.1 s"), true);
  assert(Number.isInteger(late.retryAfter) && late.retryAfter >= 1, `${late.retryAfter}`);
  const waiting = a.acquire(live());
  a.rejectWaiting(new Error("unloaded"));
  assertEquals((await assertRejects(() => waiting)).message, "unloaded");
  second();
  assertEquals([a.inFlight, a.queueDepth], [0, 0]);
});
