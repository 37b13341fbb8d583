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
    return [0, 1, 2, 3].filter((id) => (mask.bits[id >>> 5] >>> (id & 31)) & 1);
  };
  assertEquals(tokens(masks.automaton.start), [0, 1]);
  assertEquals(tokens(masks.automaton.walk(masks.automaton.start, pieces[1])), [2]);
});

Deno.test("matcher: admits counts the draft tokens restrict and accept would allow, changing nothing", () => {
  const masks = setup(
    String.raw`root ::= "{" ws ("\"" [a-b]* "\"")? ws "}"` + "\nws ::= [ \\n]{0,2}",
  );
  const reasoning = { open: OPEN, close: CLOSE, startInside: false, mayOpen: true };
  let seed = 12345;
  const random = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 8) % n;
  };
  const replay = (ids: number[]): GrammarMatcher => {
    const m = new GrammarMatcher(masks, EOG, reasoning);
    for (const id of ids) m.accept(id);
    return m;
  };
  let cut = 0;
  for (let trial = 0; trial < 300; trial++) {
    // Tokens taken first (each one allowed), then a draft: mostly tokens the grammar takes
    // next, now and then any token.
    const taken: number[] = [];
    for (let n = random(5); n > 0; n--) {
      const ok = allowed(replay(taken));
      if (ok === null) break;
      taken.push(ok[random(ok.length)]);
    }
    const draft: number[] = [];
    let free = false;
    for (let n = 1 + random(5); n > 0; n--) {
      const ok: number[] | null = free ? null : allowed(replay([...taken, ...draft]));
      free = ok === null || random(4) === 0;
      draft.push(free ? random(PIECES.length) : ok![random(ok!.length)]);
    }
    const walker = replay(taken);
    let expected = 0;
    for (const id of draft) {
      if (!(allowed(walker) ?? []).includes(id)) break;
      walker.accept(id);
      expected++;
    }
    const m = replay(taken);
    const before = allowed(m);
    assertEquals(m.admits(draft), expected, `after ${taken}, draft ${draft}`);
    assertEquals(allowed(m), before, "admits changed nothing");
    if (expected < draft.length) cut++;
  }
  assert(cut > 30 && cut < 270, `${cut} of 300 drafts cut`);
});
