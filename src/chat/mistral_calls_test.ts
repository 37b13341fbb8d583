import { assert, assertEquals } from "../../tests/support/assert.ts";
import { assertEveryChunking } from "../../tests/support/chunking.ts";
import { newMistralCallId } from "./mistral_calls.ts";
import { OutputParser, type OutputParserOptions, type ParsedOutput } from "./output_parser.ts";

const MISTRAL: OutputParserOptions = { reasoning: false, toolCalls: true, syntax: "mistral" };

const WEATHER = { name: "get_weather", arguments: '{"city":"Paris"}' };

const calls = (...toolCalls: ParsedOutput["toolCalls"]): ParsedOutput => ({
  reasoning: "",
  content: "",
  toolCalls,
});
const content = (text: string): ParsedOutput => ({ reasoning: "", content: text, toolCalls: [] });

const CASES: { name: string; output: string; expected: ParsedOutput }[] = [
  {
    name: "one call, as v0.3 writes it",
    output: '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    expected: calls(WEATHER),
  },
  {
    name: "two calls with ids",
    output: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, ' +
      '"id": "abcDEF123"}, {"name": "get_time", "arguments": {}, "id": "Zz9Zz9Zz9"}]',
    expected: calls({ ...WEATHER, id: "abcDEF123" }, {
      name: "get_time",
      arguments: "{}",
      id: "Zz9Zz9Zz9",
    }),
  },
  {
    name: "an id of the wrong form is dropped",
    output:
      '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_1"}]',
    expected: calls(WEATHER),
  },
  {
    name: "text before the marker is content",
    output:
      'Let me check.\n\n[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]\n',
    expected: { reasoning: "", content: "Let me check.", toolCalls: [WEATHER] },
  },
  {
    name: "arguments as a JSON string, and a single object",
    output: '[TOOL_CALLS] {"name": "f", "arguments": "{\\"a\\": 1}"}',
    expected: calls({ name: "f", arguments: '{"a": 1}' }),
  },
  {
    name: "unicode and brackets inside strings",
    output: '[TOOL_CALLS] [{"name": "say", "arguments": {"text": "]} héllo 🌍 [{"}}]',
    expected: calls({ name: "say", arguments: '{"text":"]} héllo 🌍 [{"}' }),
  },
  {
    name: "text after the calls is content",
    output: '[TOOL_CALLS] [{"name": "now", "arguments": {}}] Done.',
    expected: { reasoning: "", content: "Done.", toolCalls: [{ name: "now", arguments: "{}" }] },
  },
  {
    name: "calls cut short (length) stay content",
    output: 'Sure [TOOL_CALLS] [{"name": "f", "arguments": {',
    expected: content('Sure [TOOL_CALLS] [{"name": "f", "arguments": {'),
  },
  {
    name: "no JSON after the marker",
    output: "[TOOL_CALLS] call f please",
    expected: content("[TOOL_CALLS] call f please"),
  },
  {
    name: "JSON that is not calls",
    output: '[TOOL_CALLS] [1, {"name": "f"}] [] ok',
    expected: content('[TOOL_CALLS] [1, {"name": "f"}] [] ok'),
  },
  {
    name: "an empty array is not calls",
    output: "[TOOL_CALLS] []",
    expected: content("[TOOL_CALLS] []"),
  },
  {
    name: "<think> is content for Mistral",
    output: "<think>plan</think>Answer [TOOL_",
    expected: content("<think>plan</think>Answer [TOOL_"),
  },
];

for (const c of CASES) {
  Deno.test(`mistral tool calls: ${c.name}`, () => {
    assertEveryChunking(c.output, MISTRAL, c.expected);
  });
}

Deno.test("mistral tool calls: text streams until the marker; calls come when the array ends", () => {
  const parser = new OutputParser(MISTRAL);
  assertEquals(parser.push("Checking [TOOL"), [{ kind: "content", text: "Checking" }]);
  assertEquals(parser.push('_CALLS] [{"name": "f", '), []);
  assertEquals(parser.push('"arguments": {}}]'), [
    { kind: "tool_call", call: { name: "f", arguments: "{}" } },
  ]);
  assertEquals(parser.finish(), []);
});

Deno.test("mistral call ids are 9 letters and digits, and differ", () => {
  const ids = new Set(Array.from({ length: 64 }, newMistralCallId));
  assertEquals(ids.size, 64);
  for (const id of ids) assert(/^[A-Za-z0-9]{9}$/.test(id), id);
});
