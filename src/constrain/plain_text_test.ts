/**
 * How far plain text reaches from a grammar state (plain_text.ts): bounded strings are
 * closed at their remaining length, free text runs on, a class that refuses some plain
 * character reaches nowhere, and text that must be followed by something reaches as far as
 * it may run but is not closed.
 */

import { assertEquals } from "../../tests/support/assert.ts";
import { ByteAutomaton } from "./automaton.ts";
import { parseGbnf } from "./gbnf.ts";
import { jsonSchemaGrammar } from "./json_schema.ts";
import { LOOK_AHEAD, type PlainReach, PlainText } from "./plain_text.ts";

const enc = new TextEncoder();

function reach(grammar: string, prefix: string): PlainReach {
  const automaton = new ByteAutomaton(parseGbnf(grammar));
  const state = automaton.walk(automaton.start, enc.encode(prefix));
  return new PlainText(automaton).reach(state);
}

Deno.test("plain text: a bounded JSON string is closed at what it has left", () => {
  const grammar = jsonSchemaGrammar({ type: "string", maxLength: 10 });
  assertEquals(reach(grammar, '"'), { alive: 10, closed: true });
  assertEquals(reach(grammar, '"abc'), { alive: 7, closed: true });
  // Characters count, not bytes: two of three bytes each leave eight.
  assertEquals(reach(grammar, '"中文'), { alive: 8, closed: true });
  assertEquals(reach(grammar, '"0123456789'), { alive: 0, closed: true });
});

Deno.test("plain text: a free string runs on; a long one is cut at the look-ahead", () => {
  assertEquals(reach(jsonSchemaGrammar({ type: "string" }), '"'), {
    alive: Infinity,
    closed: false,
  });
  const long = jsonSchemaGrammar({ type: "string", maxLength: 100 });
  assertEquals(reach(long, '"'), { alive: LOOK_AHEAD, closed: false });
});

Deno.test("plain text: a narrower class reaches nowhere; text then a must is not closed", () => {
  assertEquals(reach("root ::= [a-z]{0,5}", ""), { alive: 0, closed: false });
  // Up to 4 characters, then an 'x' must come: 5 characters of text are alive only with x.
  assertEquals(reach('root ::= [^"]{0,4} "x"', ""), { alive: 4, closed: false });
  // Some plain characters (digits) but not all: not even one is sure.
  assertEquals(reach('root ::= "{" [0-9]', "{"), { alive: 0, closed: false });
  // No plain character at all (only a quote may come): closed at 0.
  assertEquals(reach('root ::= "a" "\\""', "a"), { alive: 0, closed: true });
});
