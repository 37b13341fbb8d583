/**
 * neuron's GBNF against llama.cpp's own grammar sampler (the live reference, over the
 * Qwen3 vocabulary), on the same grammar strings: the same grammars are refused; on each
 * accepted grammar, strings it generates and near misses of them are allowed byte by byte
 * and may end exactly where llama.cpp says so; and the tokens allowed next (the whole
 * vocabulary) are the same set at every step of a generated string. Two kinds of token are
 * left out of that comparison, where neuron is deliberately stricter: control tokens
 * (neuron never lets a grammar write one) and tokens holding bytes no UTF-8 text can hold
 * (0xF5-0xFF, overlong or surrogate sequences), which llama.cpp's partial-character
 * check lets through under a negated class.
 */

import { ByteAutomaton, ConstraintError, DEAD, parseGbnf } from "../../src/constrain/mod.ts";
import { buildTokenTrie, TokenMasks } from "../../src/constrain/mod.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";
import { fixture } from "../fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { type LlamaModel, openLlamaModel } from "../support/llama_ref.ts";
import { GRAMMARS, INVALID_GRAMMARS } from "./gbnf_grammars.ts";

const enc = new TextEncoder();

/** Bytes that can never stand in UTF-8 text, wherever the token falls in it. */
function neverUtf8(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i], c = bytes[i + 1];
    if (b >= 0xf5 || b === 0xc0 || b === 0xc1) return true;
    if (c === undefined) continue;
    if ((b === 0xe0 && c < 0xa0) || (b === 0xed && c >= 0xa0)) return true;
    if ((b === 0xf0 && c < 0x90) || (b === 0xf4 && c >= 0x90)) return true;
  }
  return false;
}
const dec = new TextDecoder();

/** Strings the automaton generates: random walks that stop where the grammar may end. */
function generate(a: ByteAutomaton, rng: Rng, count: number): string[] {
  const out = new Set<string>();
  for (let tries = 0; out.size < count && tries < count * 20; tries++) {
    let s = a.start;
    const bytes: number[] = [];
    while (bytes.length < 48) {
      if (a.accepting(s) && (a.finished(s) || rng.float() < 0.25)) break;
      const next: number[] = [];
      for (let b = 0; b < 256; b++) if (a.next(s, b) !== DEAD) next.push(b);
      const b = next[Math.floor(rng.float() * next.length)];
      s = a.next(s, b);
      bytes.push(b);
    }
    if (a.accepting(s)) out.add(dec.decode(new Uint8Array(bytes)));
  }
  return [...out];
}

/** Near misses: one character dropped, doubled or replaced. */
function mutate(text: string, rng: Rng): string[] {
  const chars = [...text];
  if (chars.length === 0) return ["x", " "];
  const i = Math.floor(rng.float() * chars.length);
  const swap = ["a", "0", '"', "]", "é", " ", "\n", "😀"][Math.floor(rng.float() * 8)];
  return [
    [...chars.slice(0, i), ...chars.slice(i + 1)].join(""),
    [...chars.slice(0, i + 1), chars[i], ...chars.slice(i + 1)].join(""),
    [...chars.slice(0, i), swap, ...chars.slice(i + 1)].join(""),
  ];
}

/** How far each side gets: the bytes allowed one by one, then whether it may end. */
function ours(a: ByteAutomaton, text: string): string {
  let s = a.start;
  const bytes = enc.encode(text);
  for (let i = 0; i < bytes.length; i++) {
    s = a.next(s, bytes[i]);
    if (s === DEAD) return `refused at byte ${i}`;
  }
  return a.accepting(s) ? "complete" : "incomplete";
}

function theirs(model: LlamaModel, grammar: string, byteToken: number[], text: string): string {
  using g = model.grammar(grammar)!;
  const bytes = enc.encode(text);
  for (let i = 0; i < bytes.length; i++) {
    const id = byteToken[bytes[i]];
    if (!g.allowed([id])[0]) return `refused at byte ${i}`;
    g.accept(id);
  }
  return g.mayEnd() ? "complete" : "incomplete";
}

Deno.test("GBNF: the grammars llama.cpp refuses are refused, with line and column", async () => {
  using model = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  for (const grammar of INVALID_GRAMMARS) {
    assertEquals(model.grammar(grammar), null, `llama.cpp took ${JSON.stringify(grammar)}`);
    let refused: unknown;
    try {
      parseGbnf(grammar);
    } catch (err) {
      refused = err;
    }
    assert(refused instanceof ConstraintError, `neuron took ${JSON.stringify(grammar)}`);
    assert(
      ["invalid_grammar", "grammar_too_complex"].includes(refused.code),
      `${grammar}: ${refused.code}`,
    );
  }
  const e = (() => {
    try {
      parseGbnf('root ::= "a" | b\n\nb ::= [x-');
    } catch (err) {
      return err as ConstraintError;
    }
  })();
  assert(e?.message.includes("line 3"), e?.message);
});

Deno.test("GBNF: 50 grammars accept and refuse byte for byte as llama.cpp's", async () => {
  using model = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  const tok = loadTokenizer(openGguf(fixture("qwen3-vocab.gguf")));
  const byteToken: number[] = [];
  for (let id = 0; id < tok.size; id++) {
    const b = tok.tokenBytes(id, false);
    if (b.length === 1 && byteToken[b[0]] === undefined) byteToken[b[0]] = id;
  }
  assertEquals(byteToken.filter((x) => x !== undefined).length, 256);
  assert(GRAMMARS.length >= 50);
  const rng = new Rng(21);
  let compared = 0, accepted = 0;
  for (const grammar of GRAMMARS) {
    const a = new ByteAutomaton(parseGbnf(grammar));
    assert(model.grammar(grammar) !== null, `llama.cpp refused ${JSON.stringify(grammar)}`);
    const positives = generate(a, rng, 6);
    assert(positives.length > 0, `nothing generated from ${JSON.stringify(grammar)}`);
    const texts = new Set([...positives, ...positives.flatMap((p) => mutate(p, rng)), "", "a"]);
    for (const text of texts) {
      const want = theirs(model, grammar, byteToken, text);
      assertEquals(ours(a, text), want, `${JSON.stringify(grammar)} on ${JSON.stringify(text)}`);
      compared++;
      if (want === "complete") accepted++;
    }
  }
  assert(accepted > 100 && compared - accepted > 100, `${accepted} of ${compared} accepted`);
});

Deno.test("GBNF: the tokens allowed next are llama.cpp's, over the whole vocabulary", async () => {
  using model = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  const tok = loadTokenizer(openGguf(fixture("qwen3-vocab.gguf")));
  const pieces = Array.from(
    { length: tok.size },
    (_, id) => tok.isControl(id) ? new Uint8Array(0) : tok.tokenBytes(id, false),
  );
  const trie = buildTokenTrie(pieces);
  const candidates = pieces.flatMap((p, id) => (p.length > 0 && !neverUtf8(p) ? [id] : []));
  const rng = new Rng(7);
  const chosen = [8, 9, 10, 13, 14, 19, 30, 31, 36, 47];
  for (const i of chosen) {
    const grammar = GRAMMARS[i];
    const masks = new TokenMasks(new ByteAutomaton(parseGbnf(grammar)), trie);
    const text = generate(masks.automaton, rng, 1)[0];
    assert(text !== undefined, `nothing generated from ${grammar}`);
    using g = model.grammar(grammar)!;
    let state = masks.automaton.start;
    for (const id of tok.encode(text).slice(0, 4)) {
      const mask = masks.mask(state);
      const mine = new Set(candidates.filter((c) => (mask.bits[c >>> 5] >>> (c & 31)) & 1));
      const allowed = g.allowed(candidates);
      const theirsSet = new Set(candidates.filter((_, k) => allowed[k]));
      const missing = [...theirsSet].filter((x) => !mine.has(x)).slice(0, 5);
      const extra = [...mine].filter((x) => !theirsSet.has(x)).slice(0, 5);
      assertEquals({ missing, extra }, { missing: [], extra: [] }, `${grammar} after ${state}`);
      assertEquals(mask.accepting, g.mayEnd(), `${grammar}: may end`);
      g.accept(id);
      state = masks.automaton.walk(state, pieces[id]);
    }
  }
});
