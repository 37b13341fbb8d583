import { assertEquals } from "../../tests/support/assert.ts";
import { assertEveryChunking } from "../../tests/support/chunking.ts";
import { parseTools } from "./messages.ts";
import { OutputParser, type OutputParserOptions, type ParsedOutput } from "./output_parser.ts";

const LLAMA3: OutputParserOptions = { reasoning: false, toolCalls: true, syntax: "llama3" };
const WITH_CODE: OutputParserOptions = {
  ...LLAMA3,
  tools: parseTools([{ type: "function", function: { name: "code_interpreter" } }]),
};

const WEATHER = { name: "get_weather", arguments: '{"city":"Paris"}' };

interface Case {
  name: string;
  output: string;
  options?: OutputParserOptions;
  expected: ParsedOutput;
}

const calls = (...toolCalls: ParsedOutput["toolCalls"]): ParsedOutput => ({
  reasoning: "",
  content: "",
  toolCalls,
});
const content = (text: string): ParsedOutput => ({ reasoning: "", content: text, toolCalls: [] });

const CASES: Case[] = [
  {
    name: "a JSON call as the whole answer",
    output: '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    expected: calls(WEATHER),
  },
  {
    name: "type and arguments keys, surrounded by whitespace",
    output: '\n {"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}} \n',
    expected: calls(WEATHER),
  },
  {
    name: "two calls separated by a semicolon",
    output: '{"name": "get_weather", "parameters": {"city": "Paris"}}; ' +
      '{"name": "get_time", "parameters": {"tz": "CET"}}',
    expected: calls(WEATHER, { name: "get_time", arguments: '{"tz":"CET"}' }),
  },
  {
    name: "text after a call is content",
    output: '{"name": "now", "parameters": {}}\n\nChecking the clock.',
    expected: {
      reasoning: "",
      content: "Checking the clock.",
      toolCalls: [{ name: "now", arguments: "{}" }],
    },
  },
  {
    name: "braces and quotes inside argument strings",
    output: '{"name": "say", "parameters": {"text": "a } b { \\"c\\" ]"}}',
    expected: calls({ name: "say", arguments: '{"text":"a } b { \\"c\\" ]"}' }),
  },
  {
    name: "unicode arguments",
    output: '{"name": "say", "parameters": {"text": "héllo 🌍 思考"}}',
    expected: calls({ name: "say", arguments: '{"text":"héllo 🌍 思考"}' }),
  },
  {
    name: "a JSON object later in an answer is text",
    output: 'Send this: {"name": "f", "parameters": {}}',
    expected: content('Send this: {"name": "f", "parameters": {}}'),
  },
  {
    name: "a JSON answer that is not a call stays content",
    output: '{"answer": 42, "name": "x"}',
    expected: content('{"answer": 42, "name": "x"}'),
  },
  {
    name: "parameters that are not an object are not a call",
    output: '{"name": "f", "parameters": [1, 2]}',
    expected: content('{"name": "f", "parameters": [1, 2]}'),
  },
  {
    name: "a call cut short (length) stays content",
    output: '  {"name": "f", "parameters": {"a": ',
    expected: content('  {"name": "f", "parameters": {"a": '),
  },
  {
    name: "a second object that is not a call is content",
    output: '{"name": "now", "parameters": {}} {"note": 1}',
    expected: {
      reasoning: "",
      content: '{"note": 1}',
      toolCalls: [{ name: "now", arguments: "{}" }],
    },
  },
  {
    name: "python_tag then a built-in tool call",
    output: '<|python_tag|>brave_search.call(query="weather in Paris")',
    expected: calls({ name: "brave_search", arguments: '{"query":"weather in Paris"}' }),
  },
  {
    name: "a built-in call with several arguments",
    output: '<|python_tag|>wolfram_alpha.call(query="2+2", digits=3, exact=true)',
    expected: calls({
      name: "wolfram_alpha",
      arguments: '{"query":"2+2","digits":3,"exact":true}',
    }),
  },
  {
    name: "python_tag then JSON calls",
    output: 'Let me look.\n<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    expected: { reasoning: "", content: "Let me look.", toolCalls: [WEATHER] },
  },
  {
    name: "python_tag then code, with a code interpreter offered",
    output: "<|python_tag|>import math\nprint(math.pi)",
    options: WITH_CODE,
    expected: calls({
      name: "code_interpreter",
      arguments: JSON.stringify({ code: "import math\nprint(math.pi)" }),
    }),
  },
  {
    name: "python_tag then code, without a code interpreter, is content",
    output: "Run: <|python_tag|>print(1)",
    expected: content("Run: <|python_tag|>print(1)"),
  },
  {
    name: "a malformed built-in call is content",
    output: "<|python_tag|>brave_search.call(query=)",
    expected: content("<|python_tag|>brave_search.call(query=)"),
  },
  {
    name: "python_tag then a broken JSON call is content",
    output: '<|python_tag|>{"name": "f", "parameters": {}} trailing',
    expected: content('<|python_tag|>{"name": "f", "parameters": {}} trailing'),
  },
  {
    name: "<think> is content for Llama",
    output: '<think>hmm</think>{"name": "f", "parameters": {}}',
    expected: content('<think>hmm</think>{"name": "f", "parameters": {}}'),
  },
  {
    name: "plain text with a lone brace and a partial tag",
    output: "a < b and {x} <|python",
    expected: content("a < b and {x} <|python"),
  },
  {
    name: "whitespace only",
    output: "\n\n",
    expected: content("\n\n"),
  },
];

for (const c of CASES) {
  Deno.test(`llama3 tool calls: ${c.name}`, () => {
    assertEveryChunking(c.output, c.options ?? LLAMA3, c.expected);
  });
}

Deno.test("llama3 tool calls: plain text streams at once; a call waits for its end", () => {
  const parser = new OutputParser(LLAMA3);
  assertEquals(parser.push("The answer"), [{ kind: "content", text: "The answer" }]);
  assertEquals(parser.push(" is 4. <|pyth"), [{ kind: "content", text: " is 4." }]);
  assertEquals(parser.push("on_tag|>f.call("), []);
  assertEquals(parser.push(")"), []);
  assertEquals(parser.finish(), [{ kind: "tool_call", call: { name: "f", arguments: "{}" } }]);

  const json = new OutputParser(LLAMA3);
  assertEquals(json.push('{"name": "f", "parameters": {'), []);
  assertEquals(json.push("}}"), [{ kind: "tool_call", call: { name: "f", arguments: "{}" } }]);
});

Deno.test("llama3 tool calls: tool calls off, the output is content", () => {
  const output = '{"name": "f", "parameters": {}}';
  assertEveryChunking(output, { reasoning: false, syntax: "llama3" }, content(output));
});
