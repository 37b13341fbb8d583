import { assertEquals } from "../../../tests/support/assert.ts";
import { DraftPolicy, MAX_PAUSE } from "./draft_policy.ts";

Deno.test("draft policy: full acceptance grows k, a miss shrinks it, partial sets it", () => {
  const p = new DraftPolicy(8);
  assertEquals(p.next(), 8);
  p.observe(8, 0);
  assertEquals(p.next(), 4);
  p.observe(4, 4);
  assertEquals(p.next(), 8);
  p.observe(8, 2);
  assertEquals(p.next(), 3);
});

Deno.test("draft policy: failures at k = 1 pause drafting, longer each time, up to MAX_PAUSE", () => {
  const p = new DraftPolicy(2);
  p.observe(2, 0);
  const pauses: number[] = [];
  for (let round = 0; round < 9; round++) {
    assertEquals(p.next(), 1);
    p.observe(1, 0);
    let paused = 0;
    while (p.next() === 0) paused++;
    pauses.push(paused);
    // The probe that ended the pause was a draft of 1 that failed again.
    p.observe(1, 0);
    p.observe(0, 0);
    let again = 0;
    while (p.next() === 0) again++;
    pauses.push(again);
  }
  assertEquals(pauses.slice(0, 6), [1, 2, 4, 8, 16, 32]);
  assertEquals(Math.max(...pauses), MAX_PAUSE);
  assertEquals(pauses.at(-1), MAX_PAUSE);
});

Deno.test("draft policy: a success after pauses resets the backoff; fixed k never moves", () => {
  const p = new DraftPolicy(1);
  for (let i = 0; i < 5; i++) {
    p.observe(1, 0);
    while (p.next() === 0);
  }
  p.observe(1, 1);
  p.observe(1, 0);
  assertEquals([p.next(), p.next()], [0, 1], "a pause of one step again");
  const fixed = new DraftPolicy(4, false);
  fixed.observe(4, 0);
  fixed.observe(4, 0);
  assertEquals(fixed.next(), 4);
});
