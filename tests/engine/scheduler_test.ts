/**
 * The scheduler's step plans, without a model: who joins a step whose prompt chunk
 * completes a request (its first token is then due).
 */

import { assertEquals } from "../support/assert.ts";
import { BlockPool } from "../../src/engine/kv/block_pool.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Sequence } from "../../src/engine/sequence.ts";
import { GREEDY } from "../../src/engine/sampler.ts";
import type { ChunkSizer } from "../../src/engine/step_budget.ts";
import type { SequenceObserver } from "../../src/engine/request.ts";

const IGNORE: SequenceObserver = { token: () => false, finished: () => {}, failed: () => {} };

/** Distinct tokens per sequence, so no prompt is a cached prefix of another. */
function sequence(id: string, promptLength: number): Sequence {
  const ids = Array.from({ length: promptLength }, (_, i) => 1000 * id.charCodeAt(0) + i);
  const request = { id, prompt: ids, maxTokens: 4, sampling: GREEDY, stopTokenIds: [] };
  return new Sequence(request, 4, 151936, IGNORE);
}

/** A sizer that lets a step carry `budget` tokens in all. */
function tokens(budget: number): ChunkSizer {
  return {
    minTokens: 4,
    fit: (work, _start, wanted) => Math.max(0, Math.min(wanted, budget - work.tokens)),
  };
}

function plan(s: Scheduler, budget: number): string[] {
  const runs = s.schedule(tokens(budget));
  s.complete(runs);
  for (const r of runs) if (r.sample) r.seq.onToken({ id: 7 }, undefined);
  return runs.map((r) => `${r.seq.id}:${r.count}${r.sample ? "!" : ""}`);
}

Deno.test("a prompt that completes is not delayed by a chunk of a long prompt", () => {
  const s = new Scheduler(new BlockPool(64, 16), { maxSequences: 8 });
  s.enqueue(sequence("long", 400));
  assertEquals(plan(s, 48), ["long:48"]);
  s.enqueue(sequence("short", 20));
  assertEquals(plan(s, 48), ["short:20!"]);
});

Deno.test("prompts that complete together share the step, up to the latency floor", () => {
  const s = new Scheduler(new BlockPool(64, 16), { maxSequences: 8 });
  for (const [id, n] of [["a", 20], ["b", 10], ["c", 30]] as const) s.enqueue(sequence(id, n));
  // b completes and caps the step at 32 more tokens: a fits in them, c does not.
  assertEquals(plan(s, 64), ["b:10!", "a:20!"]);
});

Deno.test("a prompt progresses every step, even when nothing fits the step's time", () => {
  const s = new Scheduler(new BlockPool(64, 16), { maxSequences: 8 });
  s.enqueue(sequence("long", 100));
  assertEquals(plan(s, 0), ["long:1"]);
  for (const id of ["a", "b", "c"]) s.enqueue(sequence(id, 2));
  assertEquals(plan(s, 64), ["a:2!", "b:2!", "c:2!"]);
  // Three decodes fill a 3-token step: the long prompt still gets its 4 tokens, once.
  assertEquals(plan(s, 3), ["a:1!", "b:1!", "c:1!", "long:4"]);
});
