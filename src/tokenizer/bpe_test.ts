import { assert, assertEquals } from "../../tests/support/assert.ts";
import { BpeScratch, mergeWord } from "./bpe.ts";
import { MergeTable } from "./merges.ts";

/** A merge table that counts the pairs it is asked to rank: the work of a merge. */
class CountingTable extends MergeTable {
  ranked = 0;

  override rank(a: number, b: number): number {
    this.ranked++;
    return super.rank(a, b);
  }
}

function tableOf(vocab: string[], merges: string[]): CountingTable {
  return new CountingTable(new Map(vocab.map((t, i) => [t, i])), vocab.length, merges);
}

// ASCII letters are their own GPT-2 byte characters, so these vocabularies need no mapping.
function merge(
  vocab: string[],
  merges: string[],
  word: string,
  table = tableOf(vocab, merges),
): string[] {
  const scratch = new BpeScratch();
  scratch.ensure(word.length);
  for (let i = 0; i < word.length; i++) scratch.ids[i] = table.byteIds[word.charCodeAt(i)];
  return mergeWord(table, scratch, word.length).map((id) =>
    id < vocab.length ? vocab[id] : `<extra ${id}>`
  );
}

Deno.test("merges apply in rank order", () => {
  const vocab = ["a", "b", "c", "ab", "bc", "abc"];
  assertEquals(merge(vocab, ["a b", "b c", "ab c"], "abc"), ["abc"]);
  assertEquals(merge(vocab, ["b c", "a b", "ab c"], "abc"), ["a", "bc"]);
});

Deno.test("equal ranks merge the leftmost pair first", () => {
  assertEquals(merge(["a", "aa"], ["a a"], "aaa"), ["aa", "a"]);
  assertEquals(merge(["a", "aa", "aaaa"], ["a a", "aa aa"], "aaaaa"), ["aaaa", "a"]);
});

Deno.test("a pair listed twice keeps its first rank", () => {
  const vocab = ["a", "b", "c", "ab", "bc"];
  assertEquals(merge(vocab, ["b c", "a b", "b c"], "abc"), ["a", "bc"]);
});

Deno.test("a merge whose result is not a token still merges, as llama.cpp's texts do", () => {
  const vocab = ["x", "y", "z", "xyz"];
  // "xy" is no token, but "xy z" needs it: the symbol exists only in the merge table.
  assertEquals(merge(vocab, ["x y", "xy z"], "xyz"), ["xyz"]);
  const out = merge(vocab, ["x y"], "xy");
  assertEquals(out.length, 1);
  assert(out[0].startsWith("<extra"), "an extra symbol, resolved to bytes by the tokenizer");
});

Deno.test("a 100 kB word merges with a linear number of pair lookups", () => {
  const letters = "abcdefghij";
  const vocab = [...letters];
  const merges: string[] = [];
  for (const a of letters) {
    for (const b of letters) {
      vocab.push(a + b);
      merges.push(`${a} ${b}`);
    }
  }
  let seed = 12345;
  let word = "";
  for (let i = 0; i < 100_000; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    word += letters[(seed >>> 16) % letters.length];
  }
  const table = tableOf(vocab, merges);
  const out = merge(vocab, merges, word, table);
  assertEquals(out.join(""), word);
  assert(out.every((t) => t.length <= 2) && out.length < 75_000, "every pair merge used");
  // The word's pairs, then at most the two new neighbours of each merge: a merge that
  // looked the pairs up again after each merge would make ~n^2 / 2 lookups.
  assert(table.ranked <= 3 * word.length, `${table.ranked} lookups for ${word.length} letters`);
});
