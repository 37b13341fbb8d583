import { assert, assertEquals } from "../../tests/support/assert.ts";
import { assertEveryChunking, feed } from "../../tests/support/chunking.ts";
import { growth } from "../../tests/support/growth.ts";
import { OutputParser, type OutputParserOptions, type ParsedOutput } from "./output_parser.ts";
import { promptOpensReasoning } from "./reasoning.ts";

interface Case {
  name: string;
  output: string;
  options: OutputParserOptions;
  expected: ParsedOutput;
}

const WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}';
const TIME = '{"name": "get_time", "arguments": {"tz": "CET"}}';

const CASES: Case[] = [
  {
    name: "think then answer",
    output: "<think>\nThe user wants 2+2.\n\nIt is 4.\n</think>\n\nThe answer is 4.",
    options: {},
    expected: {
      reasoning: "The user wants 2+2.\n\nIt is 4.",
      content: "The answer is 4.",
      toolCalls: [],
    },
  },
  {
    name: "prompt opened the think block",
    output: "Hmm, ok.\n</think>\n\nHi!\n",
    options: { startInReasoning: true },
    expected: { reasoning: "Hmm, ok.", content: "Hi!\n", toolCalls: [] },
  },
  {
    name: "prompt opened the think block and the model repeats it",
    output: "<think>\nx\n</think>\ny",
    options: { startInReasoning: true },
    expected: { reasoning: "x", content: "y", toolCalls: [] },
  },
  {
    name: "empty think block (enable_thinking=false style)",
    output: "<think>\n\n</think>\n\nShort answer.",
    options: {},
    expected: { reasoning: "", content: "Short answer.", toolCalls: [] },
  },
  {
    name: "no think block, a late <think> is content",
    output: "Plain answer with a <think> tag and a < b.",
    options: { toolCalls: true },
    expected: {
      reasoning: "",
      content: "Plain answer with a <think> tag and a < b.",
      toolCalls: [],
    },
  },
  {
    name: "reasoning then a Hermes tool call",
    output: `<think>\nNeed the weather.\n</think>\n\n<tool_call>\n${WEATHER}\n</tool_call>`,
    options: { toolCalls: true },
    expected: {
      reasoning: "Need the weather.",
      content: "",
      toolCalls: [{ name: "get_weather", arguments: '{"city":"Paris"}' }],
    },
  },
  {
    name: "content and two tool calls",
    output:
      `Let me check both.\n<tool_call>\n${WEATHER}\n</tool_call>\n<tool_call>\n${TIME}\n</tool_call>\n`,
    options: { toolCalls: true },
    expected: {
      reasoning: "",
      content: "Let me check both.",
      toolCalls: [
        { name: "get_weather", arguments: '{"city":"Paris"}' },
        { name: "get_time", arguments: '{"tz":"CET"}' },
      ],
    },
  },
  {
    name: "Qwen3-Coder XML tool call",
    output:
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
    options: { toolCalls: true },
    expected: {
      reasoning: "",
      content: "",
      toolCalls: [{ name: "get_weather", arguments: '{"city":"New York","days":3}' }],
    },
  },
  {
    name: "malformed tool-call JSON stays content",
    output: 'Try:\n<tool_call>\n{"name": "f", "arguments": {\n</tool_call>\nok',
    options: { toolCalls: true },
    expected: {
      reasoning: "",
      content: 'Try:\n<tool_call>\n{"name": "f", "arguments": {\n</tool_call>\nok',
      toolCalls: [],
    },
  },
  {
    name: "unterminated tool call stays content",
    output: 'Sure <tool_call>\n{"name": "f"',
    options: { toolCalls: true },
    expected: { reasoning: "", content: 'Sure <tool_call>\n{"name": "f"', toolCalls: [] },
  },
  {
    name: "tool calls off: tags are content",
    output: `<tool_call>\n${WEATHER}\n</tool_call>`,
    options: {},
    expected: { reasoning: "", content: `<tool_call>\n${WEATHER}\n</tool_call>`, toolCalls: [] },
  },
  {
    name: "reasoning off: think tags are content",
    output: "<think>x</think>y",
    options: { reasoning: false },
    expected: { reasoning: "", content: "<think>x</think>y", toolCalls: [] },
  },
  {
    name: "unicode around the tags",
    output: "<think>思考 🤔\n</think>\n答案 👍🏽 — “ok” <tool_call>\n" +
      '{"name": "say", "arguments": {"text": "héllo 🌍"}}\n</tool_call>',
    options: { toolCalls: true },
    expected: {
      reasoning: "思考 🤔",
      content: "答案 👍🏽 — “ok”",
      toolCalls: [{ name: "say", arguments: '{"text":"héllo 🌍"}' }],
    },
  },
  {
    name: "think never closed (length cut)",
    output: "<think>\nStill thinking about <tool_call> and </thi",
    options: { toolCalls: true },
    expected: {
      reasoning: "Still thinking about <tool_call> and </thi",
      content: "",
      toolCalls: [],
    },
  },
  {
    name: "whitespace-only output",
    output: "\n\n",
    options: { toolCalls: true },
    expected: { reasoning: "", content: "\n\n", toolCalls: [] },
  },
];

for (const c of CASES) {
  Deno.test(`output parser: ${c.name}`, () => {
    assertEveryChunking(c.output, c.options, c.expected);
  });
}

Deno.test("text before a partial tag is released once it can no longer be a tag", () => {
  const parser = new OutputParser({ toolCalls: true });
  assertEquals(parser.push("Hello <tool"), [{ kind: "content", text: "Hello" }]);
  assertEquals(parser.push("s are"), [{ kind: "content", text: " <tools are" }]);
  assertEquals(parser.push(" <tool_c"), []);
  assertEquals(parser.push('all>{"name": "f"}</tool_call>'), [
    { kind: "tool_call", call: { name: "f", arguments: "{}" } },
  ]);
  assertEquals(parser.finish(), []);
});

Deno.test("reasoning streams as it comes and reports that it is reasoning", () => {
  const parser = new OutputParser({ startInReasoning: true });
  assertEquals(parser.inReasoning, true);
  assertEquals(parser.push("Let me "), [{ kind: "reasoning", text: "Let me" }]);
  assertEquals(parser.push("see.</th"), [{ kind: "reasoning", text: " see." }]);
  assertEquals(parser.push("ink>\n\nDone"), [{ kind: "content", text: "Done" }]);
  assertEquals(parser.inReasoning, false);
});

Deno.test("a prompt that leaves <think> open starts the output in reasoning", () => {
  assertEquals(promptOpensReasoning("<|im_start|>assistant\n<think>\n"), true);
  assertEquals(promptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"), false);
  assertEquals(promptOpensReasoning("<|im_start|>assistant\n"), false);
  assertEquals(
    promptOpensReasoning("<think>\nold\n</think>\n\nx<|im_end|>\n<|im_start|>assistant\n<think>\n"),
    true,
  );
});

Deno.test("a long tool call streamed in small pieces costs linear time", () => {
  const call = (lines: number): { output: string; code: string } => {
    const code = "x = 1\n".repeat(lines);
    const output = `<tool_call>\n${
      JSON.stringify({ name: "run", arguments: { code } })
    }\n</tool_call>`;
    return { output, code };
  };
  const piecesOf = (output: string): string[] => {
    const pieces: string[] = [];
    for (let i = 0; i < output.length; i += 4) pieces.push(output.slice(i, i + 4));
    return pieces;
  };
  const { output, code } = call(40_000);
  const result = feed(piecesOf(output), { toolCalls: true });
  assertEquals(result.toolCalls, [{ name: "run", arguments: JSON.stringify({ code }) }]);
  assertEquals(result.content, "");
  // Four times the pieces: about four times the time if each piece costs the same, sixteen
  // if each rescans what came before.
  const ratio = growth(
    (n) => piecesOf(call(n).output),
    (pieces) => feed(pieces, { toolCalls: true }),
    10_000,
  );
  assert(ratio < 10, `4x the pieces took ${ratio.toFixed(1)}x the time`);
});
