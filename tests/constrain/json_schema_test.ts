/**
 * Soundness of the JSON-schema grammars without a model: random walks through each
 * grammar's automaton (300 seeded schemas, schemas.ts) end only on documents that parse
 * and that ajv validates, formats included. A walk picks each next byte at random among
 * those the grammar allows, so it reaches corners a model would rarely visit.
 */

import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { ByteAutomaton, DEAD, jsonSchemaGrammar, parseGbnf } from "../../src/constrain/mod.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { assert } from "../support/assert.ts";
import { SchemaMaker } from "./schemas.ts";

const ajv = new Ajv2020({ strict: false });
addFormats.default(ajv);

/** Bytes that close structures sooner: a walk biased toward them ends in fewer steps. */
const CLOSERS = new Set([...'"}]0123456789,ntf'].map((c) => c.charCodeAt(0)));

Deno.test("json schema grammars generate only documents valid under their schema", () => {
  const maker = new SchemaMaker(77);
  const rng = new Rng(78);
  const dec = new TextDecoder("utf-8", { fatal: true });
  let checked = 0;
  for (let i = 0; i < 300; i++) {
    const schema = maker.document();
    const a = new ByteAutomaton(parseGbnf(jsonSchemaGrammar(schema)));
    const validate = ajv.compile(schema);
    for (let walk = 0; walk < 3; walk++) {
      let s = a.start;
      const bytes: number[] = [];
      while (!a.finished(s) && bytes.length < 3000) {
        const next: number[] = [];
        for (let b = 0; b < 256; b++) if (a.next(s, b) !== DEAD) next.push(b);
        const closing = next.filter((b) => CLOSERS.has(b));
        const from = closing.length > 0 && rng.float() < 0.7 ? closing : next;
        const b = from[Math.floor(rng.float() * from.length)];
        s = a.next(s, b);
        bytes.push(b);
      }
      if (!a.accepting(s)) continue;
      const text = dec.decode(new Uint8Array(bytes));
      const value = JSON.parse(text);
      assert(validate(value), `schema ${i}: ${JSON.stringify(validate.errors)}\n${text}`);
      checked++;
    }
  }
  assert(checked >= 600, `only ${checked} walks ended`);
});
