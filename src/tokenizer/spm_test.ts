import { assert, assertEquals } from "../../tests/support/assert.ts";
import { mergeSpm, type SpmTable } from "./spm.ts";

// Byte tokens are ids 0..255 (byte b -> id b); pieces follow from 256.
function table(pieces: [string, number][]): { table: SpmTable; texts: string[] } {
  const texts = [...Array.from({ length: 256 }, (_, b) => `<${b}>`), ...pieces.map(([t]) => t)];
  const scores = Float32Array.from([...new Array(256).fill(0), ...pieces.map(([, s]) => s)]);
  const byteIds = Int32Array.from({ length: 256 }, (_, b) => b);
  return { table: { idOf: new Map(texts.map((t, i) => [t, i])), scores, byteIds }, texts };
}

function merge(pieces: [string, number][], text: string, budget?: number): string[] {
  const { table: t, texts } = table(pieces);
  const out: number[] = [];
  const run = mergeSpm(t, text, out, budget);
  while (!run.next().done);
  return out.map((id) => texts[id]);
}

Deno.test("the highest-scoring pair merges first, wherever it is", () => {
  const pieces: [string, number][] = [
    ["▁", -9],
    ["h", -9],
    ["e", -9],
    ["l", -9],
    ["o", -9],
    ["▁h", -3],
    ["he", -2],
    ["ll", -1],
    ["llo", -4],
    ["hello", -5],
    ["▁he", -6],
  ];
  // ll, then he, then llo, then hello: "▁h" (leftmost) never gets its turn.
  assertEquals(merge(pieces, "▁hello"), ["▁", "hello"]);
  // With "▁h" best, the left end wins and "hello" can no longer form.
  const leftFirst = pieces.map(([t, s]): [string, number] => [t, t === "▁h" ? 0 : s]);
  assertEquals(merge(leftFirst, "▁hello"), ["▁he", "llo"]);
});

Deno.test("equal scores merge the leftmost pair first", () => {
  const pieces: [string, number][] = [["a", 0], ["aa", -1], ["aaaa", -1]];
  assertEquals(merge(pieces, "aaa"), ["aa", "a"]);
  assertEquals(merge(pieces, "aaaaa"), ["aaaa", "a"]);
});

Deno.test("a symbol that is no token falls back to its UTF-8 bytes", () => {
  const pieces: [string, number][] = [["a", 0], ["🙂", 0]];
  assertEquals(merge(pieces, "aéa"), ["a", "<195>", "<169>", "a"]);
  // A surrogate pair is one symbol: the emoji is a token of its own.
  assertEquals(merge(pieces, "a🙂"), ["a", "🙂"]);
  assertEquals(merge(pieces, "😀"), ["<240>", "<159>", "<152>", "<128>"]);
});

Deno.test("pausing after any number of merge steps gives the same ids", () => {
  const pieces: [string, number][] = [["a", 0], ["b", 0], ["ab", -1], ["ba", -2], ["abab", 0]];
  const text = "abababbabaabbbaab".repeat(5);
  const whole = merge(pieces, text);
  for (const budget of [1, 2, 3, 7, 1000]) assertEquals(merge(pieces, text, budget), whole);
});

Deno.test("a 100 kB text takes a bounded number of merge steps", () => {
  // Every run of equal letters merges in a cascade: the pathological case for a rescan.
  const pieces: [string, number][] = [["a", 0]];
  for (let n = 2; n <= 64; n *= 2) pieces.push(["a".repeat(n), -Math.log2(n)]);
  const { table: t } = table(pieces);
  const text = "a".repeat(100_000);
  const out: number[] = [];
  let steps = 0;
  for (const _ of mergeSpm(t, text, out, 1)) steps++;
  // Each merge pushes at most two pairs on top of the n - 1 seeds: at most 3n pops.
  assert(steps <= 3 * text.length, `${steps} merge steps for ${text.length} symbols`);
  assertEquals(out.length, Math.ceil(100_000 / 64));
});
