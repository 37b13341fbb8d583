import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ByteAutomaton, DEAD } from "./automaton.ts";
import { parseGbnf } from "./gbnf.ts";
import { GrammarMatcher } from "./matcher.ts";
import { TokenMasks } from "./token_masks.ts";
import { buildTokenTrie } from "./vocab_trie.ts";

const enc = new TextEncoder();
/** A small vocabulary: pieces by id; 9 and 10 are control tokens (no bytes), 9 ends text. */
const PIECES = ["{", "}", '"', "a", "ab", '"a', '"}', " ", "\n\n", "", "", "<t>", "</t>", "é"]
  .map((p) => enc.encode(p));
const EOG = [9];
const OPEN = 11, CLOSE = 12;

function setup(grammar: string): TokenMasks {
  return new TokenMasks(new ByteAutomaton(parseGbnf(grammar)), buildTokenTrie(PIECES));
}

/** What a brute force says is allowed: each token's bytes walked from the state. */
function bruteForce(masks: TokenMasks, state: number): number[] {
  const a = masks.automaton;
  const out: number[] = [];
  PIECES.forEach((p, id) => {
    if (p.length > 0 && a.walk(state, p) !== DEAD) out.push(id);
  });
  if (a.accepting(state)) out.push(...EOG);
  return out.sort((x, y) => x - y);
}

function allowed(m: GrammarMatcher): number[] | null {
  const logits = new Float32Array(PIECES.length).fill(1);
  if (!m.restrict(logits)) return null;
  return [...logits.keys()].filter((i) => logits[i] !== -Infinity);
}

Deno.test("matcher: the mask is what walking each token allows, the end only when complete", () => {
  const masks = setup(
    String.raw`root ::= "{" ws ("\"" [a-b]* "\"")? ws "}"` + "\nws ::= [ \\n]{0,2}",
  );
  const m = new GrammarMatcher(masks, EOG);
  let state = masks.automaton.start;
  for (const id of [0, 7, 5, 4, 6]) {
    assertEquals(allowed(m), bruteForce(masks, state), `before token ${id}`);
    m.accept(id);
    state = masks.automaton.walk(state, PIECES[id]);
  }
  assertEquals(allowed(m), EOG);
  assert(m.complete);
  m.accept(9);
  assertEquals(allowed(m), null);
});

Deno.test("matcher: logits of allowed tokens are kept as they were, the rest -Infinity", () => {
  const masks = setup(`root ::= "a" "b"?`);
  const m = new GrammarMatcher(masks, EOG);
  const logits = Float32Array.from(PIECES, (_, i) => i / 10);
  assert(m.restrict(logits));
  assertEquals(
    [...logits].map((x) => (x === -Infinity ? null : x)),
    [
      null,
      null,
      null,
      0.3,
      0.4,
      ...Array(9).fill(null),
    ].map((x) => (x === null ? null : Math.fround(x))),
  );
});

Deno.test("matcher: with no end token, a finished grammar allows nothing", () => {
  const m = new GrammarMatcher(setup(`root ::= "a"`), []);
  m.accept(3);
  assertEquals(allowed(m), null);
});

Deno.test("matcher: reasoning is free (but for ending) until it closes, then the grammar", () => {
  const masks = setup(`root ::= "{" "}"`);
  const inside = new GrammarMatcher(masks, EOG, {
    open: OPEN,
    close: CLOSE,
    startInside: true,
    mayOpen: false,
  });
  const free = allowed(inside)!;
  assert(!free.includes(9) && free.includes(3) && free.includes(10), `${free}`);
  inside.accept(3);
  inside.accept(CLOSE);
  assertEquals(allowed(inside), [0]);

  const may = new GrammarMatcher(masks, EOG, {
    open: OPEN,
    close: CLOSE,
    startInside: false,
    mayOpen: true,
  });
  assertEquals(allowed(may), [0, OPEN]);
  may.accept(OPEN);
  assert(allowed(may)!.includes(4));
  may.accept(CLOSE);
  may.accept(0);
  assertEquals(allowed(may), [1]);
});

Deno.test("matcher: tokens that split a character are followed byte by byte", () => {
  const pieces = [enc.encode("é"), Uint8Array.of(0xc3), Uint8Array.of(0xa9), enc.encode("x")];
  const masks = new TokenMasks(
    new ByteAutomaton(parseGbnf(`root ::= [é]+`)),
    buildTokenTrie(pieces),
  );
  const tokens = (state: number): number[] => {
    const mask = masks.mask(state);
    if (mask.ids) return [...mask.ids];
    return [0, 1, 2, 3].filter((id) => (mask.bits![id >>> 5] >>> (id & 31)) & 1);
  };
  assertEquals(tokens(masks.automaton.start), [0, 1]);
  assertEquals(tokens(masks.automaton.walk(masks.automaton.start, pieces[1])), [2]);
});
