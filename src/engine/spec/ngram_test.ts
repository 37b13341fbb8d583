import { assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { NgramIndex } from "./ngram.ts";

Deno.test("ngram: proposes what followed the latest earlier occurrence of the longest suffix", () => {
  const index = new NgramIndex({ min: 2, max: 4 });
  // "1 2 3" occurs twice before the suffix; the later one (followed by 7) wins.
  const tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 6, 1, 2, 3];
  assertEquals(index.propose(tokens, 3), [7, 8, 6]);
  // A longer match beats a later shorter one: "5 2 3" only matches its first occurrence.
  const longer = [5, 2, 3, 40, 41, 0, 2, 3, 50, 0, 5, 2, 3];
  assertEquals(new NgramIndex({ min: 2, max: 3 }).propose(longer, 2), [40, 41]);
});

Deno.test("ngram: nothing without a match, and never the suffix itself", () => {
  const index = new NgramIndex({ min: 3, max: 5 });
  assertEquals(index.propose([1, 2, 3, 4, 5, 6], 4), []);
  assertEquals(index.propose([1, 2, 3], 4), []);
  assertEquals(index.propose([1, 2, 3, 4], 0), []);
});

Deno.test("ngram: grows with its sequence, and a loop is proposed past the history's end", () => {
  const index = new NgramIndex({ min: 3, max: 3 });
  const tokens = [9, 1, 2, 3, 1, 2];
  assertEquals(index.propose(tokens, 2), []);
  tokens.push(3);
  // "1 2 3" ended at 3 before: 1 2 3 follow, then the copy runs into itself.
  assertEquals(index.propose(tokens, 5), [1, 2, 3, 1, 2]);
  tokens.push(1, 2, 3, 4);
  assertEquals(index.propose(tokens, 2), []);
  tokens.push(9, 1, 2);
  // "9 1 2" only opened the sequence.
  assertEquals(index.propose(tokens, 3), [3, 1, 2]);
});

Deno.test("ngram: a range that cannot match is refused", () => {
  assertThrows(() => new NgramIndex({ min: 0, max: 3 }), RangeError);
  assertThrows(() => new NgramIndex({ min: 4, max: 3 }), RangeError);
});
