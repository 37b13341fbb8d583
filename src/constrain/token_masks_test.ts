/**
 * The checker of the fast masks: on the Qwen3 vocabulary, the masks the CPU kernel library
 * walks (kernels/cpu/token_mask.c) over plain-text slices (text_slices.ts) equal those of
 * the TypeScript walk of the whole trie, state for state, over grammars of each kind (a
 * schema with bounded and free strings, JSON mode, GBNF with multi-byte classes),
 * including states whose transitions the native walk finds missing and comes back for.
 * And nk_token_mask_apply against its reference.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { openGguf, Rng } from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import { ByteAutomaton } from "./automaton.ts";
import { parseGbnf } from "./gbnf.ts";
import { jsonObjectGrammar, jsonSchemaGrammar } from "./json_schema.ts";
import { applyBits, applyMask } from "./matcher.ts";
import { PlainText } from "./plain_text.ts";
import { slicesOf } from "./text_slices.ts";
import { type TokenMask, TokenMasks } from "./token_masks.ts";
import { buildTokenTrie } from "./vocab_trie.ts";

function tokens(mask: TokenMask): number[] {
  const out: number[] = [];
  mask.bits.forEach((word, w) => {
    for (let b = 0; b < 32; b++) if ((word >>> b) & 1) out.push(w * 32 + b);
  });
  return out;
}

Deno.test("token masks: the native walk over slices equals the TypeScript walk of the trie", () => {
  const tok = loadTokenizer(openGguf(fixture("qwen3-vocab.gguf")));
  const pieces = Array.from(
    { length: tok.size },
    (_, id) => tok.isControl(id) ? new Uint8Array(0) : tok.tokenBytes(id, false),
  );
  const trie = buildTokenTrie(pieces);
  const grammars = [
    jsonSchemaGrammar({
      type: "object",
      properties: { s: { type: "string", maxLength: 5 }, n: { type: "integer", maximum: 99 } },
      required: ["s", "n"],
    }),
    jsonSchemaGrammar({
      type: "object",
      properties: {
        long: { type: "string", minLength: 3, maxLength: 40 },
        free: { type: "string" },
      },
      required: ["long", "free"],
    }),
    jsonObjectGrammar(),
    'root ::= [^"]{0,3} "\\"" [α-ω]+ | "x"',
    'root ::= [^\n]{0,30} "\n" [a-zé]{2,40}',
    'root ::= [^"]{0,10} "x" [0-9]{1,30}',
  ];
  const rng = new Rng(5);
  const slices = slicesOf(trie);
  const kinds = new Set<string>();
  let compared = 0;
  for (const text of grammars) {
    const grammar = parseGbnf(text);
    // Separate automata: the native walk meets every transition uncomputed.
    const native = new TokenMasks(new ByteAutomaton(grammar), trie);
    const plain = new TokenMasks(new ByteAutomaton(grammar), trie, {
      native: false,
      slices: false,
    });
    assert(native.native, "the CPU kernel library did not open");
    const reach = new PlainText(native.automaton);
    let a = native.automaton.start, b = plain.automaton.start;
    for (let step = 0; step < 30; step++) {
      const { alive, closed } = reach.reach(a);
      const slice = slices.sliceFor({ alive, closed });
      kinds.add(
        slice === null ? "whole trie" : closed ? "closed" : alive === Infinity ? "free" : "bytes",
      );
      const x = native.mask(a), y = plain.mask(b);
      const ids = tokens(x);
      assertEquals([x.count, x.accepting], [y.count, y.accepting]);
      assertEquals(ids, tokens(y));
      compared++;
      if (ids.length === 0) break;
      const id = ids[Math.floor(rng.float() * ids.length)];
      a = native.automaton.walk(a, pieces[id]);
      b = plain.automaton.walk(b, pieces[id]);
    }
  }
  assert(compared >= 60, `${compared} states compared`);
  // Each way a mask is made was met: every plain token at once (free text), those of at
  // most some characters (a bounded string), those of at most some bytes, none.
  assertEquals([...kinds].sort(), ["bytes", "closed", "free", "whole trie"]);
});

Deno.test("token masks: nk_token_mask_apply equals its reference, in place or copying", () => {
  const rng = new Rng(9);
  for (const n of [1, 31, 32, 100, 151_936]) {
    const bits = new Uint32Array((n + 31) >>> 5);
    for (let w = 0; w < bits.length; w++) {
      const kind = Math.floor(rng.float() * 3);
      bits[w] = kind === 0 ? 0 : kind === 1 ? 0xffffffff : Math.floor(rng.float() * 2 ** 32);
    }
    const logits = Float32Array.from({ length: n }, () => rng.float() * 20 - 10);
    const fast = logits.slice(), slow = logits.slice(), copied = new Float32Array(n).fill(7);
    applyMask(fast, bits);
    applyBits(slow, bits);
    applyMask(copied, bits, logits);
    assertEquals(fast, slow, `${n} logits`);
    assertEquals(copied, slow, `${n} logits copied from another row`);
    if (n >= 100) assert(fast.some((x) => x === -Infinity) && fast.some((x) => x > -Infinity));
  }
  // A row longer than the vocabulary: past it, nothing is allowed.
  const padded = new Float32Array(70).fill(1);
  applyMask(padded, Uint32Array.of(0xffffffff, 0xffffffff));
  assertEquals([padded[63], padded[64], padded[69]], [1, -Infinity, -Infinity]);
});
