import { assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { OutputParser } from "../chat/mod.ts";
import { openGguf } from "../gguf/mod.ts";
import { loadTokenizer } from "../tokenizer/mod.ts";
import type { GenerationEvent } from "./events.ts";
import { RequestOutput } from "./output.ts";

Deno.test("output: with one tool call at most, the generation ends when the first is read", () => {
  const tok = loadTokenizer(openGguf(fixture("qwen3-vocab.gguf")));
  const text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n<tool_call>\n';
  const events: GenerationEvent[] = [];
  const out = new RequestOutput(
    tok,
    new OutputParser({ toolCalls: true, syntax: "hermes", reasoning: false }),
    [],
    (e) => events.push(e),
    { maxToolCalls: 1 },
  );
  const ends: boolean[] = [];
  for (const id of tok.encode(text, { parseSpecial: true })) {
    const stop = out.token({ id }, undefined, null);
    ends.push(stop);
    if (stop) break;
  }
  out.finished("stop", { promptTokens: 1, completionTokens: ends.length, cachedTokens: 0 });
  assertEquals(
    ends.indexOf(true),
    tok.encode(text.slice(0, text.indexOf("</tool_call>") + 12), {
      parseSpecial: true,
    }).length - 1,
  );
  assertEquals(events.filter((e) => e.type === "tool_call").length, 1);
  assertEquals(events.at(-1)?.type === "done" && events.at(-1), {
    type: "done",
    finishReason: "tool_calls",
    usage: { promptTokens: 1, completionTokens: ends.length, cachedTokens: 0, reasoningTokens: 0 },
  });
});
