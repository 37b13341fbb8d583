import { assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { realTemplate } from "../../tests/chat/templates/mod.ts";
import { openGguf, optionalString } from "../gguf/mod.ts";
import { detectChatFormat } from "./format.ts";

function summary(source: string): unknown {
  const { toolCalls, reasoning, preservedTokens, newToolCallId } = detectChatFormat(source);
  return { toolCalls, reasoning, preservedTokens, ids: newToolCallId !== undefined };
}

Deno.test("each family's real template names its tool-call syntax; only Qwen3 reasons", () => {
  const file = openGguf(fixture("qwen3-vocab.gguf"));
  const qwen3 = optionalString(file, "tokenizer.chat_template")!;
  file.close();
  assertEquals(summary(qwen3), {
    toolCalls: "hermes",
    reasoning: true,
    preservedTokens: ["<tool_call>", "</tool_call>"],
    ids: false,
  });
  assertEquals(summary(realTemplate("qwen2.5")), {
    toolCalls: "hermes",
    reasoning: false,
    preservedTokens: ["<tool_call>", "</tool_call>"],
    ids: false,
  });
  assertEquals(summary(realTemplate("llama3.1")), {
    toolCalls: "llama3",
    reasoning: false,
    preservedTokens: ["<|python_tag|>"],
    ids: false,
  });
  assertEquals(summary(realTemplate("mistral-v0.3")), {
    toolCalls: "mistral",
    reasoning: false,
    preservedTokens: ["[TOOL_CALLS]"],
    ids: true,
  });
  assertEquals(summary(realTemplate("gemma3")), {
    toolCalls: "none",
    reasoning: false,
    preservedTokens: [],
    ids: false,
  });
});

Deno.test("formats are told apart in llama.cpp's order", () => {
  // Hermes 3 on a Llama 3.1 base writes <tool_call> blocks.
  const hermesOnLlama = "<|start_header_id|>ipython<|end_header_id|>{{ '<tool_call>' }}";
  assertEquals(detectChatFormat(hermesOnLlama).toolCalls, "hermes");
  // Llama 3.0's template has no tool turn: no syntax.
  const llama30 = "{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' }}";
  assertEquals(detectChatFormat(llama30).toolCalls, "none");
  assertEquals(detectChatFormat("{{ '<|python_tag|>' }}").toolCalls, "llama3");
  assertEquals(detectChatFormat("{{ '[TOOL_CALLS] [' }}").toolCalls, "mistral");
  assertEquals(detectChatFormat("{% if x %}</think>{% endif %}").reasoning, true);
});
