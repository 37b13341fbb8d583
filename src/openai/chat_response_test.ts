import { assertEquals } from "../../tests/support/assert.ts";
import { chatCompletion, streamChatCompletion } from "./chat_response.ts";
import type { Generation, GenerationEvent } from "./generation.ts";

const enc = (s: string) => new TextEncoder().encode(s);

function gen(events: GenerationEvent[]): Generation {
  return {
    promptTokens: 5,
    events: (async function* () {
      yield* events;
    })(),
    cancel: () => {},
  };
}

const usage = { promptTokens: 5, completionTokens: 4, cachedTokens: 0, reasoningTokens: 2 };
const EVENTS: GenerationEvent[] = [
  { type: "delta", reasoning: "hm", tokens: [{ id: 1, bytes: enc("hm"), logprob: -0.5 }] },
  // A token that produced no text yet: its log-prob rides on the next chunk.
  { type: "delta", tokens: [{ id: 2, bytes: new Uint8Array([0xe2]), logprob: -0.25 }] },
  {
    type: "delta",
    reasoning: "!",
    content: "ok",
    tokens: [{ id: 3, bytes: enc("ok"), logprob: -1 }],
  },
  { type: "tool_call", name: "f", arguments: "{}" },
  { type: "done", finishReason: "tool_calls", usage },
];

Deno.test("chat stream: WIRE.md chunk order, logprobs never lost, usage always, [DONE]", async () => {
  const res = streamChatCompletion(gen(EVENTS), { model: "m", logprobs: true, tokensAsIds: true });
  assertEquals(res.headers.get("content-type"), "text/event-stream");
  const text = await res.text();
  const frames = text.split("\n\n").filter(Boolean).map((f) => f.slice("data: ".length));
  assertEquals(frames.at(-1), "[DONE]");
  const chunks = frames.slice(0, -1).map((f) => JSON.parse(f));
  const shape = chunks.map((
    c,
  ) => [
    JSON.stringify(c.choices[0]?.delta ?? null),
    c.choices[0] ? c.choices[0].finish_reason : "-",
  ]);
  assertEquals(shape.slice(0, 4), [
    ['{"role":"assistant"}', null],
    ['{"reasoning_content":"hm","reasoning":"hm"}', null],
    ['{"reasoning_content":"!","reasoning":"!"}', null],
    ['{"content":"ok"}', null],
  ]);
  const call = chunks[4].choices[0].delta.tool_calls[0];
  assertEquals([call.index, call.type, call.function], [0, "function", {
    name: "f",
    arguments: "{}",
  }]);
  assertEquals(call.id.startsWith("call_"), true);
  assertEquals(shape[5], ["{}", "tool_calls"]);
  assertEquals(chunks[6].choices, []);
  assertEquals(chunks[6].usage, {
    prompt_tokens: 5,
    completion_tokens: 4,
    total_tokens: 9,
    completion_tokens_details: { reasoning_tokens: 2 },
  });
  const ids = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []).map((
    t: { token: string },
  ) => t.token);
  assertEquals(ids, ["token_id:1", "token_id:2", "token_id:3"]);
  for (const c of chunks) {
    assertEquals(c.object, "chat.completion.chunk");
    assertEquals(c.id, chunks[0].id);
    if (c.choices.length) assertEquals("finish_reason" in c.choices[0], true);
  }
});

Deno.test("chat completion: message with reasoning, tool calls, content; error as GenerationError", async () => {
  const body = await chatCompletion(gen(EVENTS), {
    model: "m",
    logprobs: false,
    tokensAsIds: false,
  });
  const choice = (body.choices as Record<string, unknown>[])[0];
  const msg = choice.message as Record<string, unknown>;
  assertEquals([msg.content, msg.reasoning_content, msg.reasoning], ["ok", "hm!", "hm!"]);
  assertEquals((msg.tool_calls as unknown[]).length, 1);
  assertEquals([choice.finish_reason, choice.logprobs], ["tool_calls", null]);
  const failed = chatCompletion(
    gen([{
      type: "done",
      finishReason: "error",
      usage,
      fault: { code: "engine_crashed", message: "boom" },
    }]),
    {
      model: "m",
      logprobs: false,
      tokensAsIds: false,
    },
  );
  const err = await failed.then(() => null, (e) => e);
  assertEquals([err?.code, err?.message], ["engine_crashed", "boom"]);
});

Deno.test("a tool call's own id (Mistral's 9 characters) is the id the client gets back", async () => {
  const events: GenerationEvent[] = [
    { type: "tool_call", name: "f", arguments: "{}", id: "abcDEF123" },
    { type: "tool_call", name: "g", arguments: "{}" },
    { type: "done", finishReason: "tool_calls", usage },
  ];
  const body = await chatCompletion(gen(events), {
    model: "m",
    logprobs: false,
    tokensAsIds: false,
  });
  const calls = (body.choices as { message: { tool_calls: { id: string }[] } }[])[0].message
    .tool_calls;
  assertEquals(calls[0].id, "abcDEF123");
  assertEquals(calls[1].id.startsWith("call_"), true);
  const text = await streamChatCompletion(gen(events), {
    model: "m",
    logprobs: false,
    tokensAsIds: false,
  }).text();
  assertEquals(text.includes('"id":"abcDEF123"'), true);
});
