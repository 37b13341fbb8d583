/**
 * The checker of nk_token_mask_walk (kernels/cpu/token_mask.c): on the Qwen3 vocabulary,
 * the masks the CPU kernel library walks equal those of the TypeScript walk, state for
 * state, over grammars of each kind (a schema, JSON mode, GBNF with multi-byte classes),
 * including states whose transitions the native walk finds missing and comes back for.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { openGguf, Rng } from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import { ByteAutomaton } from "./automaton.ts";
import { parseGbnf } from "./gbnf.ts";
import { jsonObjectGrammar, jsonSchemaGrammar } from "./json_schema.ts";
import { type TokenMask, TokenMasks } from "./token_masks.ts";
import { buildTokenTrie } from "./vocab_trie.ts";

function tokens(mask: TokenMask): number[] {
  if (mask.ids) return [...mask.ids];
  const out: number[] = [];
  mask.bits!.forEach((word, w) => {
    for (let b = 0; b < 32; b++) if ((word >>> b) & 1) out.push(w * 32 + b);
  });
  return out;
}

Deno.test("token masks: the native walk equals the TypeScript walk", () => {
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
    jsonObjectGrammar(),
    'root ::= [^"]{0,3} "\\"" [α-ω]+ | "x"',
  ];
  const rng = new Rng(5);
  let compared = 0;
  for (const text of grammars) {
    const grammar = parseGbnf(text);
    // Separate automata: the native walk meets every transition uncomputed.
    const native = new TokenMasks(new ByteAutomaton(grammar), trie);
    const plain = new TokenMasks(new ByteAutomaton(grammar), trie, { native: false });
    assert(native.native, "the CPU kernel library did not open");
    let a = native.automaton.start, b = plain.automaton.start;
    for (let step = 0; step < 12; step++) {
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
  assert(compared >= 20, `${compared} states compared`);
});
