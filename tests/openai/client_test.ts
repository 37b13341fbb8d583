/**
 * The official `openai` npm client against neuron: chat, streaming (with usage), tools
 * sent with a conversation, the Responses API, and typed errors. Tool calls coming back
 * need a model that writes `<tool_call>`; the fixtures' random weights never do, so that
 * part is served by the same renderers from a scripted generation.
 */
import OpenAI from "openai";
import {
  chatCompletion,
  type Generation,
  type GenerationEvent,
  streamChatCompletion,
} from "../../src/openai/mod.ts";
import { modelGolden } from "../fixtures.ts";
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { withNode } from "../support/node.ts";
import { loadFixture, nativeNode } from "../native/support.ts";

const golden = modelGolden("qwen3-tiny-q8_0");
const hello = golden.prompts.find((p) => p.name === "chat_hello")!;
const toolResult = golden.prompts.find((p) => p.name === "chat_tool_result")!;

Deno.test("openai client: chat, streaming with usage, tools, responses, errors", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    const thinking = { headers: { "x-include-thinking": "1" } };

    const listed = await client.models.list();
    assertEquals(listed.data.map((m) => m.id), [model]);

    const chat = await client.chat.completions.create({
      model,
      messages: hello.messages as unknown as OpenAI.ChatCompletionMessageParam[],
      temperature: 0,
      max_completion_tokens: 8,
    }, thinking);
    const ids8 = hello.greedy.slice(0, 8).map((s) => s.id);
    assertEquals(chat.choices[0].finish_reason, "length");
    assertEquals(chat.usage?.prompt_tokens, hello.tokens.length);
    assertEquals(chat.usage?.completion_tokens, ids8.length);
    assert(chat.id.startsWith("chatcmpl-"), chat.id);

    const stream = await client.chat.completions.create({
      model,
      messages: hello.messages as unknown as OpenAI.ChatCompletionMessageParam[],
      temperature: 0,
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    }, thinking);
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    let first = true;
    for await (const chunk of stream) {
      if (first) assertEquals(chunk.choices[0].delta.role, "assistant");
      first = false;
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    assertEquals(text, chat.choices[0].message.content);
    assertEquals(finish, "length");
    assertEquals(usage?.total_tokens, hello.tokens.length + 8);

    const withTools = await client.chat.completions.create({
      model,
      messages: toolResult.messages as unknown as OpenAI.ChatCompletionMessageParam[],
      tools: toolResult.tools as unknown as OpenAI.ChatCompletionTool[],
      tool_choice: "auto",
      temperature: 0,
      max_tokens: 4,
    }, thinking);
    assertEquals(withTools.usage?.prompt_tokens, toolResult.tokens.length);

    const resp = await client.responses.create({
      model,
      input: "Hello!",
      instructions: "Be brief.",
      max_output_tokens: 5,
      temperature: 0,
    });
    assertEquals(resp.status, "incomplete");
    assertEquals(resp.usage?.output_tokens, 5);
    assert(resp.output_text.length > 0, "output_text");

    const events: string[] = [];
    const rstream = await client.responses.create({
      model,
      input: "Hello!",
      max_output_tokens: 3,
      stream: true,
    });
    for await (const e of rstream) events.push(e.type);
    assertEquals(events[0], "response.created");
    assertEquals(events.at(-1), "response.incomplete");
    assert(events.includes("response.output_text.delta"), events.join(","));

    const missing = await assertRejects(
      () =>
        client.chat.completions.create({
          model: "no/such-model",
          messages: [{ role: "user", content: "x" }],
        }),
      OpenAI.NotFoundError,
    );
    assertEquals(missing.code, "model_not_found");
    const tooMany = await assertRejects(
      () =>
        client.chat.completions.create({
          model,
          messages: [{ role: "user", content: "x" }],
          n: 129,
        }),
      OpenAI.BadRequestError,
    );
    assertEquals(tooMany.param, "n");
  });
});

Deno.test("openai client: bodies of the wrong shape raise BadRequestError naming field and limit", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "x" }];
    const cases: [string, () => Promise<unknown>, string, string][] = [
      [
        "17 stop sequences",
        () =>
          client.chat.completions.create({
            model,
            messages,
            stop: Array.from({ length: 17 }, (_, i) => `s${i}`),
          }),
        "stop",
        "at most 16 stop sequences",
      ],
      [
        "temperature 3",
        () => client.chat.completions.create({ model, messages, temperature: 3 }),
        "temperature",
        "between 0 and 2",
      ],
      [
        "max_tokens -1",
        () => client.completions.create({ model, prompt: "a", max_tokens: -1 }),
        "max_tokens",
        "at least 0",
      ],
      [
        "no messages",
        () => client.chat.completions.create({ model, messages: [] }),
        "messages",
        "at least one message",
      ],
    ];
    for (const [what, call, param, limit] of cases) {
      const err = await assertRejects(call, OpenAI.BadRequestError);
      assertEquals([err.status, err.code, err.param], [400, "invalid_request_body", param], what);
      assert(err.message.includes(limit), `${what}: ${err.message}`);
    }
  });
});

/** A generation that replays fixed events: reasoning, content, then two tool calls. */
function scripted(): Generation {
  const events: GenerationEvent[] = [
    { type: "delta", reasoning: "The user wants weather.", tokens: [] },
    { type: "delta", content: "Checking both.", tokens: [] },
    { type: "tool_call", name: "get_weather", arguments: '{"city":"Paris"}' },
    { type: "tool_call", name: "get_weather", arguments: '{"city":"Rome"}' },
    {
      type: "done",
      finishReason: "tool_calls",
      usage: { promptTokens: 20, completionTokens: 30, cachedTokens: 0, reasoningTokens: 6 },
    },
  ];
  return {
    promptTokens: 20,
    events: (async function* () {
      yield* events;
    })(),
    cancel: () => {},
  };
}

Deno.test("openai client: tool calls and reasoning as neuron writes them", async () => {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.json();
    const opts = { model: body.model, logprobs: false, tokensAsIds: false };
    return body.stream
      ? streamChatCompletion(scripted(), opts)
      : Response.json(await chatCompletion(scripted(), opts));
  });
  try {
    const client = new OpenAI({
      apiKey: "x",
      baseURL: `http://127.0.0.1:${server.addr.port}/v1`,
      maxRetries: 0,
    });
    const params = { model: "m", messages: [{ role: "user" as const, content: "weather?" }] };
    const plain = await client.chat.completions.create(params);
    const msg = plain.choices[0].message;
    assertEquals(plain.choices[0].finish_reason, "tool_calls");
    assertEquals(msg.content, "Checking both.");
    assertEquals(
      (msg as unknown as { reasoning_content: string }).reasoning_content,
      "The user wants weather.",
    );
    const calls = msg.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    assertEquals(
      calls.map((c) => [c.type, c.function.name, JSON.parse(c.function.arguments).city]),
      [
        ["function", "get_weather", "Paris"],
        ["function", "get_weather", "Rome"],
      ],
    );
    assertEquals(plain.usage?.completion_tokens_details?.reasoning_tokens, 6);

    // The client's stream helper assembles the same message from the chunks.
    const runner = client.chat.completions.stream(params);
    const final = await runner.finalChatCompletion();
    const streamed = final.choices[0].message;
    assertEquals(final.choices[0].finish_reason, "tool_calls");
    assertEquals(streamed.content, "Checking both.");
    assertEquals(
      (streamed.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[]).map((c) =>
        c.function.arguments
      ),
      ['{"city":"Paris"}', '{"city":"Rome"}'],
    );
  } finally {
    await server.shutdown();
  }
});
