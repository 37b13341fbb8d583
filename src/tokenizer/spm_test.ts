import { assert, assertEquals } from "../../tests/support/assert.ts";
import { SpmMerger, type SpmTable } from "./spm.ts";

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
  const run = new SpmMerger(t).merge(text, out, budget);
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
  for (const _ of new SpmMerger(t).merge(text, out, 1)) steps++;
  // Each merge pushes at most two pairs on top of the n - 1 seeds: at most 3n pops.
  assert(steps <= 3 * text.length, `${steps} merge steps for ${text.length} symbols`);
  assertEquals(out.length, Math.ceil(100_000 / 64));
});

/** llama.cpp's session, plainly: texts looked up by string, a sorted scan for the best pair. */
function reference(t: SpmTable, text: string): number[] {
  const symbols = Array.from(text);
  for (;;) {
    let best = -1;
    let bestScore = -Infinity;
    for (let i = 0; i + 1 < symbols.length; i++) {
      const id = t.idOf.get(symbols[i] + symbols[i + 1]);
      if (id !== undefined && t.scores[id] > bestScore) {
        best = i;
        bestScore = t.scores[id];
      }
    }
    if (best < 0) break;
    symbols.splice(best, 2, symbols[best] + symbols[best + 1]);
  }
  return symbols.flatMap((s) => {
    const id = t.idOf.get(s);
    return id !== undefined ? [id] : Array.from(new TextEncoder().encode(s), (b) => t.byteIds[b]);
  });
}

Deno.test("the merger agrees with the plain merge on random vocabularies and texts", () => {
  let seed = 5;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 8) % n;
  };
  const alphabet = ["▁", "a", "b", "c", "é", "🙂"];
  const word = (len: number): string =>
    Array.from({ length: len }, () => alphabet[next(alphabet.length)]).join("");
  for (let v = 0; v < 40; v++) {
    const pieces = new Map<string, number>();
    for (const ch of alphabet.slice(0, 4)) pieces.set(ch, -100);
    // Few distinct scores, so ties between pairs are common.
    while (pieces.size < 30) pieces.set(word(2 + next(4)), -next(5));
    const { table: t } = table([...pieces]);
    const merger = new SpmMerger(t);
    for (let k = 0; k < 30; k++) {
      const text = word(1 + next(40));
      const out: number[] = [];
      const run = merger.merge(text, out);
      while (!run.next().done);
      assertEquals(out, reference(t, text), JSON.stringify(text));
    }
  }
});
