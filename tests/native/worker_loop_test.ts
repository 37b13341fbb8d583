/**
 * The model Worker's message loop (worker_loop.ts), driven directly with a yield the test
 * controls: the host drops events of a request it has not seen accepted, so "accepted"
 * must reach it before the request's first event, wherever a step lands.
 */

import { assertEquals } from "../support/assert.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import { GREEDY } from "../../src/engine/mod.ts";
import type { HostMessage, WorkerMessage } from "../../src/harness/native/protocol.ts";
import { WorkerLoop } from "../../src/harness/native/worker_loop.ts";
import { Doorbell } from "../../src/harness/native/yield.ts";

const golden = modelGolden("qwen3-tiny-q8_0");

Deno.test("worker loop: a request is accepted before its first token, even when a step runs right after it is queued", async () => {
  const sent: WorkerMessage[] = [];
  let held: (() => void) | null = null;
  let hold = false;
  let idle!: () => void;
  // Steps continue on a timer, except the one the test holds back to release itself.
  const stepYield = (): Promise<void> =>
    new Promise((resolve) => {
      if (hold) (held = resolve, hold = false);
      else setTimeout(resolve, 0);
    });
  const loop = new WorkerLoop((m) => {
    sent.push(m);
    if (m.op === "event" && m.event.type === "done" && m.id === "late") idle();
  }, stepYield);
  const bell = new Doorbell();
  const post = (m: HostMessage) => (bell.ring(m.op !== "stats"), loop.onMessage(m));
  post({
    op: "load",
    doorbell: bell.buffer,
    options: {
      modelPath: fixture("qwen3-tiny-q8_0.gguf"),
      device: "cpu",
      threads: 1,
      contextLength: 512,
      maxSequences: 4,
      maxBatchTokens: 64,
      kvDtype: "f16",
    },
  });
  const [first, late] = golden.prompts.filter((p) => p.tokens.length < 40);
  const request = (id: string, ids: number[], maxTokens: number) => ({
    op: "generate" as const,
    request: {
      id,
      prompt: { kind: "tokens" as const, ids },
      maxTokens,
      sampling: GREEDY,
      ignoreEos: true,
    },
  });
  try {
    const done = new Promise<void>((resolve) => (idle = resolve));
    hold = true;
    post(request("first", first.tokens, 40));
    while (held === null) await new Promise((r) => setTimeout(r, 1));
    // The new request is queued by a microtask, and the held step resumes right behind it.
    post(request("late", late.tokens, 4));
    (held as () => void)();
    await done;
    const ofLate = sent.filter((m) => "id" in m && m.id === "late");
    assertEquals(ofLate[0].op, "accepted", "the first message of the late request");
    const ids = ofLate.flatMap((m) =>
      m.op === "event" && m.event.type === "delta" ? m.event.tokens.map((t) => t.id) : []
    );
    assertEquals(ids, late.greedy.slice(0, 4).map((g) => g.id));
  } finally {
    post({ op: "close" });
  }
});
