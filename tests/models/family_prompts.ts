/**
 * The prompts every family fixture is checked on: plain text, and chat rendered with the
 * file's own template (as llama-server renders it: add_generation_prompt, tools when the
 * template takes them). Most run past Gemma 3's sliding window of 8 tokens.
 */

import type { ChatMessage, ChatTool } from "../../src/chat/mod.ts";
import { chatTemplateFromGguf } from "../../src/chat/template.ts";
import { type GgufFile, optionalNumber, optionalStringArray } from "../../src/gguf/mod.ts";
import type { Family, FixtureQuant } from "../fixtures/families/mod.ts";

export interface FamilyPrompt {
  name: string;
  text?: string;
  messages?: ChatMessage[];
  tools?: ChatTool[];
}

const WEATHER_TOOL: ChatTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "The city name" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      },
      required: ["city"],
    },
  },
};

const TEXT: FamilyPrompt[] = [
  { name: "text_fox", text: "The quick brown fox jumps over the lazy dog." },
  {
    name: "text_code",
    text:
      "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
  },
  { name: "text_numbers", text: "Prices: 3.14, 2,718 and 1e-9; call 555-0100 before 12:30 PM." },
  {
    name: "text_story",
    text: "Once upon a time, in a village at the edge of a great forest, there lived an old " +
      "clockmaker who had not spoken a word in forty years, until one winter morning a child " +
      "knocked on his door with a broken watch.",
  },
  { name: "text_unicode", text: "Grüße aus Köln! 東京は晴れ。Привет, мир. 🙂 مرحبا بالعالم" },
];

const CHAT: FamilyPrompt[] = [
  { name: "chat_hello", messages: [{ role: "user", content: "Hello! How are you today?" }] },
  {
    name: "chat_system",
    messages: [
      { role: "system", content: "You are a terse assistant. Answer in one sentence." },
      { role: "user", content: "Why is the sky blue?" },
    ],
  },
  {
    name: "chat_multiturn",
    messages: [
      { role: "user", content: "What is the capital of France?" },
      { role: "assistant", content: "The capital of France is Paris." },
      { role: "user", content: "And how many people live there?" },
    ],
  },
  {
    name: "chat_long",
    messages: [{
      role: "user",
      content: "Write a short poem about the sea at night, with the moon, a lighthouse and " +
        "a small boat coming home, in four lines that rhyme.",
    }],
  },
  { name: "chat_unicode", messages: [{ role: "user", content: "Traduis « bonjour » en 日本語." }] },
];

const TOOLS: FamilyPrompt[] = [
  {
    name: "chat_tools",
    messages: [{ role: "user", content: "What is the weather like in Paris right now?" }],
    tools: [WEATHER_TOOL],
  },
  {
    name: "chat_tool_result",
    messages: [
      { role: "user", content: "What is the weather like in Paris right now?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: "call_1",
          type: "function",
          function: { name: "get_weather", arguments: { city: "Paris" } },
        }],
      },
      { role: "tool", tool_call_id: "call_1", content: '{"temperature": 18, "sky": "cloudy"}' },
    ],
    tools: [WEATHER_TOOL],
  },
];

/** Families whose chat template renders tool definitions. */
const TAKES_TOOLS: ReadonlySet<Family> = new Set(["llama3", "qwen2"]);

/** The prompts of `family`: text, chat, and tool calling where its template has it. */
export function familyPrompts(family: Family): FamilyPrompt[] {
  return [...TEXT, ...CHAT, ...(TAKES_TOOLS.has(family) ? TOOLS : [])];
}

/**
 * The prompt's text and whether the tokenizer should add its special tokens: not when the
 * rendered chat already starts with the BOS token (Llama 3, Mistral and Gemma templates
 * write it), so that no prompt starts with two.
 */
export function promptText(file: GgufFile, p: FamilyPrompt): { text: string; addSpecial: boolean } {
  if (p.text !== undefined) return { text: p.text, addSpecial: true };
  const text = chatTemplateFromGguf(file).render(p.messages ?? [], { tools: p.tools });
  const tokens = optionalStringArray(file, "tokenizer.ggml.tokens") ?? [];
  const bos = optionalNumber(file, "tokenizer.ggml.bos_token_id");
  const bosText = bos === undefined ? undefined : tokens[bos];
  return { text, addSpecial: bosText === undefined || !text.startsWith(bosText) };
}

/**
 * The fixtures README's tolerances on the top-20 logits. At hidden 64-128 no row holds a
 * whole 256-value K-quant block, so the q4_k_m mix is Q5_0/Q8_0 there: the tolerance of the
 * legacy quantizations (llama.cpp's q8_0 activations) applies.
 */
export const FAMILY_TOLERANCE: Readonly<Record<FixtureQuant, number>> = {
  f16: 0.05,
  q8_0: 0.75,
  q4_k_m: 0.75,
};
