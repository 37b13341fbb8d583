/**
 * The bitset a matcher gives native greedy argmax (`allowed`) is exactly what its
 * `restrict` allows, in every phase (a thinking model's opening, its reasoning, the
 * grammar, done), on dense and sparse masks, accepting states included; and it is one
 * object per grammar state, shared by the matchers of the grammar.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ByteAutomaton } from "./automaton.ts";
import { parseGbnf } from "./gbnf.ts";
import { GrammarMatcher, type ReasoningTokens } from "./matcher.ts";
import { TokenMasks } from "./token_masks.ts";
import { buildTokenTrie } from "./vocab_trie.ts";

const enc = new TextEncoder();
/** Pieces by id; 9 and 10 are control tokens (no bytes), 9 ends text; 40 more letters. */
const PIECES = [
  ...["{", "}", '"', "a", "ab", '"a', '"}', " ", "\n\n", "", "", "<t>", "</t>", "é"],
  ...Array.from({ length: 40 }, (_, i) => String.fromCharCode(0x41 + (i % 26)).repeat(1 + i / 26)),
].map((p) => enc.encode(p));
const VOCAB = PIECES.length;
const EOG = [9];
const OPEN = 11, CLOSE = 12;
const GRAMMAR = String.raw`root ::= "{" ws ("\"" [a-bA-Z]* "\"")? ws "}"` + "\nws ::= [ \\n]{0,2}";

function restricted(m: GrammarMatcher): number[] | null {
  const logits = new Float32Array(VOCAB).fill(1);
  if (!m.restrict(logits)) return null;
  return [...logits.keys()].filter((i) => logits[i] !== -Infinity);
}

function bitsetIds(bits: Uint32Array | null): number[] | null {
  if (bits === null) return null;
  assertEquals(bits.length, Math.ceil(VOCAB / 32));
  return Array.from({ length: VOCAB }, (_, i) => i).filter((i) => (bits[i >>> 5] >>> (i & 31)) & 1);
}

Deno.test("mask bitsets: allowed() is what restrict() allows, in every phase, on random walks", () => {
  const masks = new TokenMasks(new ByteAutomaton(parseGbnf(GRAMMAR)), buildTokenTrie(PIECES));
  let seed = 99;
  const random = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 8) % n;
  };
  const starts: (ReasoningTokens | undefined)[] = [
    undefined,
    { open: OPEN, close: CLOSE, startInside: true, mayOpen: false },
    { open: OPEN, close: CLOSE, startInside: false, mayOpen: true },
  ];
  const seen = new Set<string>();
  for (let trial = 0; trial < 150; trial++) {
    const m = new GrammarMatcher(masks, EOG, starts[trial % 3]);
    for (let step = 0; step < 30; step++) {
      const want = restricted(m);
      assertEquals(bitsetIds(m.allowed(VOCAB)), want, `trial ${trial} step ${step}`);
      if (want === null) {
        seen.add("done");
        break;
      }
      seen.add(want.includes(9) ? "accepting" : want.length > VOCAB / 2 ? "wide" : "narrow");
      // Mostly ending the reasoning or the text where allowed, so every phase comes.
      const prefer = [CLOSE, 9].find((id) => want.includes(id) && random(3) === 0);
      m.accept(prefer ?? want[random(want.length)]);
    }
  }
  assertEquals([...seen].sort(), ["accepting", "done", "narrow", "wide"]);
});

Deno.test("mask bitsets: another vocabulary size gets null; no end token: null when finished", () => {
  const masks = new TokenMasks(
    new ByteAutomaton(parseGbnf(`root ::= "a"`)),
    buildTokenTrie(PIECES),
  );
  const m = new GrammarMatcher(masks, []);
  assertEquals(m.allowed(VOCAB + 1), null);
  assertEquals(bitsetIds(m.allowed(VOCAB)), [3]);
  m.accept(3);
  assertEquals(restricted(m), null);
  assertEquals(m.allowed(VOCAB), null);
});

Deno.test("mask bitsets: one object per grammar state, shared by the grammar's matchers", () => {
  const masks = new TokenMasks(new ByteAutomaton(parseGbnf(GRAMMAR)), buildTokenTrie(PIECES));
  const [a, b] = [new GrammarMatcher(masks, EOG), new GrammarMatcher(masks, EOG)];
  for (const id of [0, 2]) {
    a.accept(id);
    b.accept(id);
    assert(a.allowed(VOCAB) === b.allowed(VOCAB), `after ${id}: the same bitset`);
  }
  // Other end-of-generation ids: other bitsets where the state accepts.
  const c = new GrammarMatcher(masks, [10]);
  for (const id of [0, 1]) c.accept(id);
  const d = new GrammarMatcher(masks, EOG);
  for (const id of [0, 1]) d.accept(id);
  assertEquals(bitsetIds(c.allowed(VOCAB)), [10]);
  assertEquals(bitsetIds(d.allowed(VOCAB)), [9]);
});
