import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ByteAutomaton, DEAD } from "./automaton.ts";
import { ConstraintError } from "./errors.ts";
import { parseGbnf } from "./gbnf.ts";
import { jsonObjectGrammar, jsonSchemaGrammar } from "./json_schema.ts";

function matcher(schema: unknown): (text: string) => boolean {
  const a = new ByteAutomaton(parseGbnf(jsonSchemaGrammar(schema)));
  return (text) => {
    const s = a.walk(a.start, new TextEncoder().encode(text));
    return s !== DEAD && a.accepting(s);
  };
}

function refusal(schema: unknown): ConstraintError {
  try {
    jsonSchemaGrammar(schema);
  } catch (err) {
    if (err instanceof ConstraintError) return err;
    throw err;
  }
  throw new Error(`${JSON.stringify(schema)} was taken`);
}

Deno.test("json schema: objects take required properties, optional ones, nothing else", () => {
  const ok = matcher({
    type: "object",
    properties: { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } },
    required: ["b"],
    additionalProperties: false,
  });
  assert(ok('{"b": "x"}'));
  assert(ok('{"b":"x","a":1,"c":true}'));
  assert(ok('{\n  "b": "x",\n  "c": false\n}'));
  assert(!ok('{"a": 1}'));
  assert(!ok('{"b": "x", "d": 1}'));
  assert(!ok('{"b": "x",}'));
});

Deno.test("json schema: extra properties never spell a declared key", () => {
  const ok = matcher({
    type: "object",
    properties: { age: { type: "integer" } },
    additionalProperties: { type: "string" },
  });
  assert(ok('{"age": 3, "ag": "x", "agee": "y"}'));
  assert(!ok('{"age": 3, "age": "x"}'));
  assert(!ok('{"age": 3, "\\u0061ge": "x"}'));
});

Deno.test("json schema: whitespace between tokens is bounded", () => {
  const ok = matcher({ type: "object", properties: { a: { type: "null" } }, required: ["a"] });
  assert(ok(`{"a":\n${" ".repeat(20)}null}`));
  assert(!ok(`{"a":\n${" ".repeat(21)}null}`));
  assert(!ok('{"a":  null}'));
  assert(ok('{"a":\n\nnull}'));
  assert(!ok('{"a":\n\n\nnull}'));
});

Deno.test("json schema: integer bounds, string lengths, enums, refs, formats", () => {
  const int = matcher({ type: "integer", minimum: -3, exclusiveMaximum: 12 });
  assertEquals(["-3", "-4", "11", "12", "007"].map(int), [true, false, true, false, false]);
  const str = matcher({ type: "string", minLength: 2, maxLength: 3 });
  assertEquals(['"a"', '"ab"', '"a\\"c"', '"abcd"', '"ü😀"'].map(str), [
    false,
    true,
    true,
    false,
    true,
  ]);
  const en = matcher({ enum: ['a"b', 3, null, { k: [1] }] });
  assertEquals(['"a\\"b"', "3", "null", '{"k":[1]}', '"ab"'].map(en), [
    true,
    true,
    true,
    true,
    false,
  ]);
  const tree = matcher({
    $defs: { t: { type: "array", items: { $ref: "#/$defs/t" }, maxItems: 2 } },
    $ref: "#/$defs/t",
  });
  assert(tree("[[], [[]]]"));
  assert(!tree("[[], [], []]"));
  const date = matcher({ type: "string", format: "date" });
  assert(date('"2024-02-28"'));
  assert(!date('"2024-02-30"'));
  const pattern = matcher({ type: "string", pattern: "^[A-Z]{2}\\d$" });
  assertEquals(['"AB1"', '"AB"', '"ab1"'].map(pattern), [true, false, false]);
  const unanchored = matcher({ type: "string", pattern: 'a"b' });
  assert(unanchored('"xxa\\"byy"'));
  assert(!unanchored('"ab"'));
});

Deno.test("json schema: JSON mode is any object", () => {
  const a = new ByteAutomaton(parseGbnf(jsonObjectGrammar()));
  const ok = (t: string) => {
    const s = a.walk(a.start, new TextEncoder().encode(t));
    return s !== DEAD && a.accepting(s);
  };
  assertEquals(['{"a": [1, {"b": null}]}', "{}", "[]", '"x"'].map(ok), [true, true, false, false]);
});

Deno.test("json schema: what cannot be enforced is refused by name and place", () => {
  const cases: Array<[unknown, string, string]> = [
    [{ type: "array", uniqueItems: true }, "unsupported_schema", "#: the keyword 'uniqueItems'"],
    [
      { type: "object", properties: { a: { oneOf: [{ type: "string" }] } } },
      "unsupported_schema",
      "#/properties/a: the keyword 'oneOf'",
    ],
    [{ type: "string", maxLength: 5000 }, "unsupported_schema", "maxLength 5000 is above 2000"],
    [{ type: "number", maximum: 3 }, "unsupported_schema", "bounds on a number"],
    [{ type: "string", format: "uri" }, "unsupported_schema", "format 'uri'"],
    [{ type: "string", pattern: "(a)\\1" }, "unsupported_schema", "a backreference"],
    [{ type: "string", pattern: "(?=a)b" }, "unsupported_schema", "lookaround"],
    [{ $ref: "https://example.com/s.json" }, "unsupported_schema", "only references inside"],
    [{ $ref: "#/$defs/missing" }, "invalid_schema", "points at nothing"],
    [{ type: "strng" }, "invalid_schema", "#/type: must be one of"],
    [{ type: "object", required: "a" }, "invalid_schema", "#/required"],
    [{ type: "string", pattern: "(" }, "invalid_schema", "not a valid regular expression"],
    [{ type: "integer", minimum: 5, maximum: 4 }, "invalid_schema", "no integer"],
    [
      { type: "object", properties: {}, required: ["x"], additionalProperties: false },
      "invalid_schema",
      "'x' is required",
    ],
  ];
  for (const [schema, code, text] of cases) {
    const err = refusal(schema);
    assertEquals(err.code, code, `${JSON.stringify(schema)}: ${err.message}`);
    assert(err.message.includes(text), `${JSON.stringify(schema)}: ${err.message}`);
  }
});
