import { assert, assertEquals, assertThrows } from "../../tests/support/assert.ts";
import { parseChatRequest } from "./chat_request.ts";
import { OpenAiError } from "./errors.ts";
import { FALLBACK_TEMPERATURE, resolveSampling } from "./generation.ts";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const none = new Headers();

Deno.test("chat request: max_completion_tokens wins, stops, developer is system, text parts", () => {
  const r = parseChatRequest({
    ...base,
    messages: [
      { role: "developer", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
    ],
    max_tokens: 10,
    max_completion_tokens: 20,
    stop: "END",
    seed: 7,
    top_k: -1,
    logit_bias: { "42": -100 },
  }, none);
  assertEquals(r.maxTokens, 20);
  assertEquals(r.stop, ["END"]);
  assertEquals(r.messages.map((m) => m.role), ["system", "user"]);
  assertEquals(r.messages[1].content, [{ type: "text", text: "a" }, { type: "text", text: "b" }]);
  assertEquals(r.sampling.seed, 7);
  assertEquals(r.sampling.logitBias, new Map([[42, -100]]));
  assertEquals(parseChatRequest({ ...base, max_tokens: 10 }, none).maxTokens, 10);
  assertEquals(parseChatRequest(base, none).maxTokens, undefined);
  assertEquals(parseChatRequest({ ...base, stop: ["a", "", "b"] }, none).stop, ["a", "b"]);
});

Deno.test("chat request: enable_thinking defaults to x-include-thinking; the request's own wins", () => {
  assertEquals(parseChatRequest(base, none).templateKwargs, { enable_thinking: false });
  const on = new Headers({ "x-include-thinking": "1" });
  assertEquals(parseChatRequest(base, on).templateKwargs, { enable_thinking: true });
  const own = parseChatRequest(
    { ...base, chat_template_kwargs: { enable_thinking: false, x: 1 } },
    on,
  );
  assertEquals(own.templateKwargs, { enable_thinking: false, x: 1 });
});

Deno.test("chat request: reasoning_effort turns thinking on or off as reasoning.effort does", () => {
  const on = new Headers({ "x-include-thinking": "1" });
  const thinking = (body: Record<string, unknown>, headers = none) =>
    parseChatRequest({ ...base, ...body }, headers).templateKwargs.enable_thinking;
  for (const effort of ["none", "minimal"]) {
    assertEquals(thinking({ reasoning_effort: effort }, on), false, effort);
  }
  for (const effort of ["low", "medium", "high", "xhigh", "max"]) {
    assertEquals(thinking({ reasoning_effort: effort }), true, effort);
  }
  assertEquals(thinking({ reasoning_effort: null }, on), true);
  assertEquals(
    thinking({ reasoning_effort: "high", chat_template_kwargs: { enable_thinking: false } }),
    false,
  );
  const err = assertThrows(() => thinking({ reasoning_effort: "extreme" }), OpenAiError);
  assertEquals([err.code, err.param], ["invalid_request_body", "reasoning_effort"]);
  assert(err.message.includes('"minimal"'), err.message);
});

Deno.test("chat request: tool_choice none drops tools, a named one keeps only it", () => {
  const tool = (name: string) => ({ type: "function", function: { name, parameters: {} } });
  const tools = [tool("a"), tool("b")];
  assertEquals(parseChatRequest({ ...base, tools }, none).tools.length, 2);
  assertEquals(parseChatRequest({ ...base, tools, tool_choice: "none" }, none).tools, []);
  const named = parseChatRequest({
    ...base,
    tools,
    tool_choice: { type: "function", function: { name: "b" } },
  }, none);
  assertEquals(named.tools.map((t) => t.function.name), ["b"]);
});

Deno.test("chat request: refusals name the field", () => {
  const refuse = (body: Record<string, unknown>, code: string, param: string | null) => {
    const err = assertThrows(() => parseChatRequest({ ...base, ...body }, none), OpenAiError);
    assertEquals([err.code, err.param], [code, param], err.message);
  };
  refuse({ max_tokens: 0 }, "invalid_request_body", "max_tokens");
  refuse({ temperature: 3 }, "invalid_request_body", "temperature");
  refuse(
    { messages: [{ role: "user", content: 5 }] },
    "invalid_request_body",
    "messages[0].content",
  );
  refuse({ logit_bias: { x: 1 } }, "invalid_request_body", "logit_bias.x");
  refuse({ n: 129 }, "invalid_request_body", "n");
  refuse({ tool_choice: "required", tools: [] }, "invalid_request", "tool_choice");
  refuse(
    { messages: [{ role: "user", content: [{ type: "input_audio" }] }] },
    "invalid_request",
    "messages[0].content[0]",
  );
});

Deno.test("sampling: request, then the model's defaults, then temperature 0.7", () => {
  const lp = { logprobs: false, topLogprobs: 0 };
  const model = { temperature: 0.6, topK: 20, topP: 0.95 };
  const fromModel = resolveSampling({}, model, lp);
  assertEquals([fromModel.temperature, fromModel.topK, fromModel.topP, fromModel.minP], [
    0.6,
    20,
    0.95,
    0,
  ]);
  const fromRequest = resolveSampling({ temperature: 0, topK: 0 }, model, lp);
  assertEquals([fromRequest.temperature, fromRequest.topK, fromRequest.topP], [0, 0, 0.95]);
  const bare = resolveSampling({}, {}, lp);
  assertEquals([bare.temperature, bare.topK, bare.topP], [FALLBACK_TEMPERATURE, 0, 1]);
});
