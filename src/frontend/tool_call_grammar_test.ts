import { assert, assertEquals } from "../../tests/support/assert.ts";
import { parseOutput, type ToolCallSyntax } from "../chat/mod.ts";
import { ByteAutomaton, DEAD, joinParts } from "../constrain/mod.ts";
import { Rng } from "../gguf/mod.ts";
import { callGrammar } from "./tool_call_grammar.ts";

const TOOLS = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: { city: { enum: ["Paris", "Köln"] }, days: { type: "integer", maximum: 9 } },
      required: ["city", "days"],
      additionalProperties: false,
    },
  },
  { name: "ping" },
];

/** A random sentence of the grammar, biased toward closing bytes so it ends. */
function sentence(a: ByteAutomaton, rng: Rng): string {
  let s = a.start;
  const bytes: number[] = [];
  while (!a.finished(s) && bytes.length < 2000) {
    if (a.accepting(s) && rng.float() < 0.5) break;
    const next: number[] = [];
    for (let b = 0; b < 256; b++) if (a.next(s, b) !== DEAD) next.push(b);
    const closing = next.filter((b) => '}]"0,'.includes(String.fromCharCode(b)));
    const from = closing.length && rng.float() < 0.8 ? closing : next;
    const b = from[Math.floor(rng.float() * from.length)];
    s = a.next(s, b);
    bytes.push(b);
  }
  assert(a.accepting(s));
  return new TextDecoder().decode(new Uint8Array(bytes));
}

Deno.test("tool-call grammars write calls the model's own reader extracts", () => {
  const rng = new Rng(3);
  for (const syntax of ["hermes", "llama3", "mistral"] as ToolCallSyntax[]) {
    for (const parallel of [false, true]) {
      const g = callGrammar(syntax, { tools: TOOLS, mode: "required", parallel });
      const a = new ByteAutomaton(joinParts(g.parts, g.expression).build());
      for (let i = 0; i < 5; i++) {
        const text = sentence(a, rng);
        const out = parseOutput(text, { toolCalls: true, syntax, reasoning: false });
        assert(out.toolCalls.length >= 1, `${syntax}: no call in ${text}`);
        if (!parallel) assertEquals(out.toolCalls.length, 1);
        assertEquals(out.content.trim(), "", `${syntax}: ${text}`);
        for (const call of out.toolCalls) {
          const args = JSON.parse(call.arguments);
          if (call.name === "get_weather") {
            assert(["Paris", "Köln"].includes(args.city) && Number.isInteger(args.days));
            assert(args.days <= 9 && Object.keys(args).length === 2, call.arguments);
          } else {
            assertEquals(call.name, "ping");
          }
        }
      }
    }
  }
});

Deno.test("tool calls cannot be forced on a model without a tool-call syntax", () => {
  let code = "";
  try {
    callGrammar("none", { tools: TOOLS, mode: "required", parallel: false });
  } catch (err) {
    code = (err as { code: string }).code;
  }
  assertEquals(code, "unsupported_schema");
});
