import { assert, assertEquals } from "../../tests/support/assert.ts";
import { ByteAutomaton, DEAD } from "./automaton.ts";
import { ConstraintError } from "./errors.ts";
import { parseGbnf } from "./gbnf.ts";
import { joinParts } from "./spec.ts";

function accepts(grammar: string, text: string): boolean {
  const a = new ByteAutomaton(parseGbnf(grammar));
  const s = a.walk(a.start, new TextEncoder().encode(text));
  return s !== DEAD && a.accepting(s);
}

function refusal(fn: () => unknown): ConstraintError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConstraintError) return err;
    throw err;
  }
  throw new Error("nothing was refused");
}

Deno.test("gbnf: repetitions take exactly their counts", () => {
  const g = `root ::= "a"{2,4} "b"?`;
  assertEquals(["a", "aa", "aaaa", "aaaaa", "aab", "aabb"].map((t) => accepts(g, t)), [
    false,
    true,
    true,
    false,
    true,
    false,
  ]);
  assert(accepts(`root ::= ("x" | "yz")+ [0-9]*`, "xyzx42"));
  assert(!accepts(`root ::= ("x" | "yz")+ [0-9]*`, "42"));
});

Deno.test("gbnf: classes are matched over code points, as UTF-8 bytes", () => {
  assert(accepts(`root ::= [à-ÿ]+`, "éü"));
  assert(!accepts(`root ::= [à-ÿ]+`, "e"));
  assert(accepts(`root ::= [^a]`, "😀"));
  assert(!accepts(`root ::= [^a]`, "a"));
  assert(accepts(`root ::= "\\u00e9\\x41"`, "éA"));
});

Deno.test("gbnf: errors name the line and column", () => {
  const cases: Array<[string, string]> = [
    ['root ::= "a"\nb ::= [x', "line 2"],
    ["root ::= a b", "undefined rule 'a' (used at line 1, column 10)"],
    ['root ::= "\\q"', "unknown escape '\\q' at line 1, column 11"],
    ['x ::= "a"', "no 'root' rule"],
    ["root ::= <[12]>", "token references"],
    ['root ::= "a"{3,2}', "at most 2 but at least 3"],
  ];
  for (const [grammar, message] of cases) {
    const err = refusal(() => parseGbnf(grammar));
    assertEquals(err.code, "invalid_grammar");
    assert(err.message.includes(message), `${grammar}: ${err.message}`);
  }
});

Deno.test("gbnf: left recursion that would grow the stack is refused, even unseen by llama.cpp", () => {
  const hidden = 'root ::= g root "x" | "y"\ng ::= h\nh ::= "" | "z"';
  assert(refusal(() => parseGbnf(hidden)).message.includes("left recursion"));
  assert(accepts('root ::= (x?)* "."\nx ::= "a"', "aa."));
});

Deno.test("gbnf: a grammar past the size bound is refused before it is built", () => {
  const err = refusal(() => parseGbnf(`root ::= "${"a".repeat(1000)}"{0,1000}`));
  assertEquals(err.code, "grammar_too_complex");
});

Deno.test("gbnf: parts joined under prefixes keep their own rules apart", () => {
  const g = joinParts(
    [{ gbnf: 'root ::= item+\nitem ::= "a"', prefix: "p-" }, {
      gbnf: 'root ::= item\nitem ::= "b"',
      prefix: "q-",
    }],
    '"<" p-root ">" | q-root',
  ).build();
  const a = new ByteAutomaton(g);
  const ok = (t: string) => {
    const s = a.walk(a.start, new TextEncoder().encode(t));
    return s !== DEAD && a.accepting(s);
  };
  assertEquals(["<aa>", "b", "<b>", "a"].map(ok), [true, true, false, false]);
});

Deno.test("automaton: states past the bound end in grammar_too_complex", () => {
  const g = parseGbnf(`root ::= [a-z]{0,100}`);
  const a = new ByteAutomaton(g, { states: 20, stacksPerState: 64, nodes: 10_000 });
  const err = refusal(() => a.walk(a.start, new TextEncoder().encode("a".repeat(50))));
  assertEquals(err.code, "grammar_too_complex");
});
