import { assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { OpenAiError } from "./errors.ts";
import type { Generation, GenerationEvent } from "./generation.ts";
import { parseResponsesRequest } from "./responses_request.ts";
import { response, streamResponse } from "./responses_response.ts";

function gen(events: GenerationEvent[]): Generation {
  return {
    promptTokens: 3,
    events: (async function* () {
      yield* events;
    })(),
    cancel: () => {},
  };
}

const usage = { promptTokens: 3, completionTokens: 5, cachedTokens: 0, reasoningTokens: 1 };
const EVENTS: GenerationEvent[] = [
  { type: "delta", reasoning: "think", tokens: [] },
  { type: "delta", content: "Hel", tokens: [] },
  { type: "delta", content: "lo", tokens: [] },
  { type: "tool_call", name: "f", arguments: '{"a":1}' },
  { type: "done", finishReason: "tool_calls", usage },
];

Deno.test("responses request: input items become chat messages; instructions are the system turn", () => {
  const r = parseResponsesRequest({
    model: "m",
    instructions: "be brief",
    input: [
      { role: "user", content: [{ type: "input_text", text: "weather?" }] },
      { type: "function_call", call_id: "c1", name: "get", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "sunny" },
      { type: "reasoning", summary: [] },
    ],
    tools: [{ type: "function", name: "get", parameters: { type: "object" } }],
    max_output_tokens: 9,
    reasoning: { effort: "low" },
  }, new Headers());
  assertEquals(r.messages.map((m) => m.role), ["system", "user", "assistant", "tool"]);
  assertEquals(r.messages[2].tool_calls?.[0].function, { name: "get", arguments: "{}" });
  assertEquals(r.messages[3].tool_call_id, "c1");
  assertEquals(r.tools[0].function.name, "get");
  assertEquals([r.maxTokens, r.templateKwargs.enable_thinking], [9, true]);
});

Deno.test("responses request: reasoning.effort none/minimal turn thinking off, others on", () => {
  const on = new Headers({ "x-include-thinking": "1" });
  const thinking = (effort: string, headers = new Headers()) =>
    parseResponsesRequest({ model: "m", input: "x", reasoning: { effort } }, headers)
      .templateKwargs.enable_thinking;
  assertEquals([thinking("none", on), thinking("minimal", on)], [false, false]);
  assertEquals(["low", "medium", "high", "xhigh", "max"].map((e) => thinking(e)), [
    true,
    true,
    true,
    true,
    true,
  ]);
  const err = assertThrows(() => thinking("extreme"), OpenAiError);
  assertEquals([err.code, err.param], ["invalid_request_body", "reasoning.effort"]);
});

Deno.test("responses: output items, usage for clients and for the gateway's metering", async () => {
  const body = await response(gen(EVENTS), {
    model: "m",
    echo: parseResponsesRequest({ model: "m", input: "x" }, new Headers()).echo,
  });
  assertEquals(body.status, "completed");
  const output = body.output as Record<string, unknown>[];
  assertEquals(output.map((o) => o.type), ["reasoning", "message", "function_call"]);
  assertEquals((output[1].content as Record<string, unknown>[])[0].text, "Hello");
  assertEquals([output[2].name, output[2].arguments], ["f", '{"a":1}']);
  assertEquals(body.usage, {
    input_tokens: 3,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 5,
    output_tokens_details: { reasoning_tokens: 1 },
    total_tokens: 8,
    prompt_tokens: 3,
    completion_tokens: 5,
  });
});

Deno.test("responses stream: events in order, numbered, ending with response.completed", async () => {
  const echo = parseResponsesRequest({ model: "m", input: "x" }, new Headers()).echo;
  const text = await streamResponse(gen(EVENTS), { model: "m", echo }).text();
  const frames = text.split("\n\n").filter(Boolean).map((f) => {
    const [event, data] = f.split("\n");
    return { event: event.slice("event: ".length), data: JSON.parse(data.slice("data: ".length)) };
  });
  assertEquals(frames.map((f) => f.event), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assertEquals(frames.map((f) => f.data.sequence_number), frames.map((_, i) => i));
  assertEquals(frames.every((f) => f.data.type === f.event), true);
  assertEquals(frames[10].data.text, "Hello");
  assertEquals(frames.at(-1)!.data.response.usage.output_tokens, 5);
});

Deno.test("responses: a message cut by the token limit is incomplete, in the body and the stream", async () => {
  const cut: GenerationEvent[] = [
    { type: "delta", content: "Hel", tokens: [] },
    { type: "done", finishReason: "length", usage },
  ];
  const echo = parseResponsesRequest({ model: "m", input: "x" }, new Headers()).echo;
  const body = await response(gen(cut), { model: "m", echo });
  assertEquals(body.status, "incomplete");
  assertEquals((body.output as Record<string, unknown>[])[0].status, "incomplete");

  const text = await streamResponse(gen(cut), { model: "m", echo }).text();
  const frames = text.split("\n\n").filter(Boolean).map((f) =>
    JSON.parse(f.split("\n")[1].slice("data: ".length))
  );
  const itemDone = frames.find((f) => f.type === "response.output_item.done");
  assertEquals(itemDone.item.status, "incomplete");
  const last = frames.at(-1);
  assertEquals([last.type, last.response.output[0].status], ["response.incomplete", "incomplete"]);
});

Deno.test("responses: a tool call's own id is its call_id", async () => {
  const body = await response(
    gen([
      { type: "tool_call", name: "f", arguments: "{}", id: "abcDEF123" },
      { type: "done", finishReason: "tool_calls", usage },
    ]),
    { model: "m", echo: parseResponsesRequest({ model: "m", input: "x" }, new Headers()).echo },
  );
  const [call] = body.output as Record<string, unknown>[];
  assertEquals([call.type, call.call_id], ["function_call", "abcDEF123"]);
});
