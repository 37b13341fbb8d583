/**
 * The front end with other families' templates: the Qwen3 vocabulary with a control token
 * renamed to the family's tool-call marker and the family's real template, so that a
 * request runs from messages to tool-call events as it would with that model's file.
 */

import { assert, assertEquals } from "../../tests/support/assert.ts";
import { fixture } from "../../tests/fixtures.ts";
import { type Family, realTemplateOf } from "../../tests/chat/templates/mod.ts";
import { writeVariant } from "../../tests/support/gguf_variant.ts";
import { type ChatMessage, type ChatTool, parseTools } from "../chat/mod.ts";
import { GREEDY } from "../engine/sampler.ts";
import { Kv, openGguf } from "../gguf/mod.ts";
import { FrontEndError } from "./errors.ts";
import type { GenerationEvent } from "./events.ts";
import { FrontEnd } from "./front_end.ts";

/** Control tokens of the Qwen3 vocabulary that the variants rename. */
const BOX_START = 151648;
const TOOLS = parseTools([{
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
}]);

async function withFamily(
  family: Family,
  marker: string | null,
  run: (frontEnd: FrontEnd) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    const { source } = realTemplateOf(family);
    const path = writeVariant(fixture("qwen3-vocab.gguf"), `${dir}/${family}.gguf`, (kv) => {
      kv.set("tokenizer.chat_template", Kv.string(source));
      kv.set("tokenizer.ggml.add_bos_token", Kv.bool(true));
      if (marker !== null) {
        const tokens = [...kv.get("tokenizer.ggml.tokens")!.value as string[]];
        tokens[BOX_START] = marker;
        kv.set("tokenizer.ggml.tokens", Kv.strings(tokens));
      }
    });
    const file = openGguf(path);
    try {
      await run(FrontEnd.fromGguf(file));
    } finally {
      file.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Runs `output` (marker token first, if any) through a prepared chat request's pipeline. */
async function generate(
  frontEnd: FrontEnd,
  messages: ChatMessage[],
  tools: ChatTool[],
  output: string,
  marker: boolean,
): Promise<GenerationEvent[]> {
  const events: GenerationEvent[] = [];
  const prepared = await frontEnd.prepare(
    { id: "r", prompt: { kind: "messages", messages, tools }, sampling: GREEDY },
    (e) => events.push(e),
  );
  const tok = frontEnd.tokenizer;
  const ids = [...(marker ? [BOX_START] : []), ...tok.encode(output), tok.eosId!];
  ids.forEach((id, i) =>
    prepared.output.token({ id }, undefined, i === ids.length - 1 ? "stop_token" : null)
  );
  prepared.output.finished("stop", {
    promptTokens: 1,
    completionTokens: ids.length,
    cachedTokens: 0,
  });
  return events;
}

const ASK: ChatMessage[] = [{ role: "user", content: "Weather in Paris?" }];
const calls = (events: GenerationEvent[]) => events.filter((e) => e.type === "tool_call");
const text = (events: GenerationEvent[]): string =>
  events.map((e) => e.type === "delta" ? e.content ?? "" : "").join("");
const finish = (events: GenerationEvent[]): unknown =>
  events.map((e) => e.type === "done" ? e.finishReason : undefined).find((r) => r);

Deno.test("Mistral: [TOOL_CALLS] reaches the reader only when tools are offered; calls get ids", async () => {
  await withFamily("mistral-v0.3", "[TOOL_CALLS]", async (frontEnd) => {
    assertEquals([frontEnd.hasToolCalls, frontEnd.hasReasoning], [true, false]);
    const output = ' [{"name": "get_weather", "arguments": {"city": "Paris"}}]';
    const withTools = await generate(frontEnd, ASK, TOOLS, output, true);
    const [call] = calls(withTools);
    assert(call.type === "tool_call");
    assertEquals([call.name, call.arguments], ["get_weather", '{"city":"Paris"}']);
    assert(/^[A-Za-z0-9]{9}$/.test(call.id!), call.id);
    assertEquals([text(withTools), finish(withTools)], ["", "tool_calls"]);
    // Without tools the control token shows no text, as any other.
    const without = await generate(frontEnd, ASK, [], output, true);
    assertEquals([calls(without), text(without), finish(without)], [[], output, "stop"]);
  });
});

Deno.test("Llama 3.1: a <|python_tag|> call and a JSON call; <think> is content", async () => {
  await withFamily("llama3.1", "<|python_tag|>", async (frontEnd) => {
    assertEquals([frontEnd.hasToolCalls, frontEnd.hasReasoning], [true, false]);
    const tagged = await generate(frontEnd, ASK, TOOLS, 'get_weather.call(city="Paris")', true);
    assertEquals(calls(tagged), [
      { type: "tool_call", name: "get_weather", arguments: '{"city":"Paris"}' },
    ]);
    const json = '{"name": "get_weather", "parameters": {"city": "Paris"}}';
    assertEquals(calls(await generate(frontEnd, ASK, TOOLS, json, false)), [
      { type: "tool_call", name: "get_weather", arguments: '{"city":"Paris"}' },
    ]);
    const thinking = await generate(frontEnd, ASK, TOOLS, "<think>x</think> Sunny.", false);
    assertEquals([text(thinking), calls(thinking)], ["<think>x</think> Sunny.", []]);
  });
});

Deno.test("a BOS the tokenizer adds is in the prompt once", async () => {
  await withFamily("gemma3", null, async (frontEnd) => {
    const prepared = await frontEnd.prepare(
      { id: "r", prompt: { kind: "messages", messages: ASK }, sampling: GREEDY },
      () => {},
    );
    const bos = frontEnd.tokenizer.bosId!;
    const prompt = prepared.request.prompt;
    assertEquals([prompt[0], prompt.indexOf(bos, 1)], [bos, -1]);
    assertEquals(frontEnd.hasToolCalls, false);
  });
});

Deno.test("Gemma's role rule (no tool turns) is a template_render_failed that says it", async () => {
  await withFamily("gemma3", null, async (frontEnd) => {
    const err = await frontEnd.prepare(
      {
        id: "r",
        prompt: {
          kind: "messages",
          messages: [...ASK, {
            role: "assistant",
            content: null,
            tool_calls: [{ type: "function", function: { name: "get_weather", arguments: "{}" } }],
          }, { role: "tool", content: "18C" }],
        },
        sampling: GREEDY,
      },
      () => {},
    ).then(() => null, (e) => e);
    assert(err instanceof FrontEndError);
    assertEquals(err.code, "template_render_failed");
    assertEquals(
      err.message,
      "the model's chat template refused these messages: " +
        "Conversation roles must alternate user/assistant/user/assistant/...",
    );
  });
});

Deno.test("Qwen2.5: Hermes calls as Qwen3's, but <think> is content (its template has none)", async () => {
  await withFamily("qwen2.5", null, async (frontEnd) => {
    assertEquals([frontEnd.hasToolCalls, frontEnd.hasReasoning], [true, false]);
    const output = '<think>x</think>\n<tool_call>\n{"name": "get_weather", "arguments": ' +
      '{"city": "Paris"}}\n</tool_call>';
    const events = await generate(frontEnd, ASK, TOOLS, output, false);
    assertEquals(calls(events), [
      { type: "tool_call", name: "get_weather", arguments: '{"city":"Paris"}' },
    ]);
    assertEquals([text(events), finish(events)], ["<think>x</think>", "tool_calls"]);
  });
});
