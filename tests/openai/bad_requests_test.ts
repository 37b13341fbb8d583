/**
 * Requests a client gets wrong, each answered with its documented status and OpenAI's
 * error envelope naming the field, before any work starts; the node keeps serving.
 */
import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, v1 } from "../native/support.ts";

type Json = Record<string, unknown>;

const MIB = 1024 * 1024;

Deno.test("bad requests: status, envelope and field for each; the node keeps serving", async () => {
  await withNode({ ...nativeNode(), max_request_bytes: 8 * MIB }, async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const msgs = [{ role: "user", content: "Hello!" }];
    const cases: [string, string, unknown, number, string, string | null, string?][] = [
      [
        "wrong type",
        "chat/completions",
        { model, messages: msgs, temperature: "hot" },
        400,
        "invalid_request_body",
        "temperature",
      ],
      [
        "negative max_tokens",
        "chat/completions",
        { model, messages: msgs, max_tokens: -5 },
        400,
        "invalid_request_body",
        "max_tokens",
      ],
      [
        "messages not a list",
        "chat/completions",
        { model, messages: "hi" },
        400,
        "invalid_request_body",
        "messages",
      ],
      [
        "empty messages",
        "chat/completions",
        { model, messages: [] },
        400,
        "invalid_request_body",
        "messages",
      ],
      [
        "unknown role",
        "chat/completions",
        { model, messages: [{ role: "wizard", content: "x" }] },
        400,
        "invalid_request_body",
        "messages[0].role",
      ],
      [
        "unknown model",
        "chat/completions",
        { model: "nobody/none", messages: msgs },
        404,
        "model_not_found",
        null,
        "nobody/none",
      ],
      [
        "too many stop sequences",
        "chat/completions",
        { model, messages: msgs, stop: Array.from({ length: 17 }, (_, i) => `s${i}`) },
        400,
        "invalid_request_body",
        "stop",
        "at most 16 stop sequences",
      ],
      [
        "temperature out of range",
        "completions",
        { model, prompt: "a", temperature: 2.5 },
        400,
        "invalid_request_body",
        "temperature",
        "between 0 and 2",
      ],
      [
        "too many top_logprobs",
        "chat/completions",
        { model, messages: msgs, logprobs: true, top_logprobs: 21 },
        400,
        "invalid_request_body",
        "top_logprobs",
        "between 0 and 20",
      ],
      [
        "empty input",
        "responses",
        { model, input: [] },
        400,
        "invalid_request_body",
        "input",
        "at least one item",
      ],
      [
        "missing model",
        "chat/completions",
        { messages: msgs },
        400,
        "invalid_request_body",
        "model",
      ],
      [
        "image part to a text model",
        "chat/completions",
        {
          model,
          messages: [{
            role: "user",
            content: [{ type: "text", text: "what is this?" }, {
              type: "image_url",
              image_url: { url: "data:image/png;base64,AA==" },
            }],
          }],
        },
        400,
        "invalid_request",
        "messages[0].content[1]",
        "text only",
      ],
      [
        "n above 128",
        "chat/completions",
        { model, messages: msgs, n: 129 },
        400,
        "invalid_request_body",
        "n",
        "between 1 and 128",
      ],
      [
        "top_logprobs without logprobs",
        "chat/completions",
        { model, messages: msgs, top_logprobs: 3 },
        400,
        "invalid_request",
        "top_logprobs",
      ],
      [
        "tool_choice naming no tool",
        "chat/completions",
        { model, messages: msgs, tool_choice: { type: "function", function: { name: "f" } } },
        400,
        "invalid_request",
        "tool_choice",
      ],
      [
        "a schema keyword that cannot be enforced",
        "chat/completions",
        {
          model,
          messages: msgs,
          response_format: {
            type: "json_schema",
            json_schema: { name: "s", schema: { type: "array", uniqueItems: true } },
          },
        },
        400,
        "invalid_request",
        "response_format.json_schema.schema",
        "'uniqueItems' is not supported",
      ],
      [
        "a grammar that does not parse",
        "completions",
        { model, prompt: "a", grammar: 'root ::= "a" (b' },
        400,
        "invalid_request",
        "grammar",
        "line 1, column",
      ],
      [
        "a grammar and a response format together",
        "chat/completions",
        {
          model,
          messages: msgs,
          grammar: 'root ::= "a"',
          response_format: { type: "json_object" },
        },
        400,
        "invalid_request",
        "grammar",
        "cannot be given together",
      ],
      [
        "a tool whose parameters cannot be enforced, forced",
        "chat/completions",
        {
          model,
          messages: msgs,
          tools: [{
            type: "function",
            function: { name: "f", parameters: { type: "object", patternProperties: {} } },
          }],
          tool_choice: "required",
        },
        400,
        "invalid_request",
        "tools[0].function.parameters",
        "'patternProperties'",
      ],
      [
        "text.format with a dangling $ref",
        "responses",
        {
          model,
          input: "hi",
          text: { format: { type: "json_schema", name: "s", schema: { $ref: "#/$defs/x" } } },
        },
        400,
        "invalid_request",
        "text.format.schema",
        "points at nothing",
      ],
      [
        "more tokens than the context holds",
        "chat/completions",
        { model, messages: msgs, max_tokens: 5000 },
        400,
        "context_length_exceeded",
        null,
        "maximum context length is 1024 tokens",
      ],
      [
        "token id outside the vocabulary",
        "completions",
        { model, prompt: [999999999] },
        400,
        "invalid_request",
        null,
        "outside the vocabulary",
      ],
      [
        "logit_bias on a token outside the vocabulary",
        "chat/completions",
        { model, messages: msgs, logit_bias: { "151936": 5 } },
        400,
        "invalid_request_body",
        "logit_bias.151936",
        "outside this model's vocabulary",
      ],
      [
        "several prompts",
        "completions",
        { model, prompt: ["a", "b"] },
        400,
        "invalid_request",
        "prompt",
      ],
      [
        "previous_response_id",
        "responses",
        { model, input: "hi", previous_response_id: "resp_1" },
        400,
        "invalid_request",
        "previous_response_id",
      ],
      [
        "built-in tool",
        "responses",
        { model, input: "hi", tools: [{ type: "web_search" }] },
        400,
        "invalid_request",
        "tools[0]",
      ],
    ];
    for (const [what, route, body, status, code, param, text] of cases) {
      const res = await v1(node, route, body);
      const b = await jsonOf(res) as { error: Json };
      assertEquals([res.status, b.error.code], [status, code], `${what}: ${JSON.stringify(b)}`);
      assertEquals(b.error.param, param, `${what}: param`);
      assertEquals(typeof b.error.message, "string");
      assertEquals(b.error.type, "invalid_request_error");
      if (text) assertStringIncludes(String(b.error.message), text);
    }

    const raw = async (body: BodyInit, type = "application/json") =>
      await node.post("/v1/chat/completions", body as string, {
        headers: { "content-type": type },
      });
    const malformed = await raw("{not json");
    assertEquals([malformed.status, ((await jsonOf(malformed)) as { error: Json }).error.code], [
      400,
      "malformed_json",
    ]);
    const media = await raw("model=x", "text/plain");
    assertEquals(media.status, 415);
    await media.body?.cancel();
    const huge = JSON.stringify({
      model,
      messages: [{ role: "user", content: "x".repeat(10 * MIB) }],
    });
    const big = await raw(huge);
    assertEquals([big.status, ((await jsonOf(big)) as { error: Json }).error.code], [
      413,
      "payload_too_large",
    ]);

    // None of it disturbed the model: a normal request is served, nothing is in flight.
    const ok = await v1(node, "chat/completions", { model, messages: msgs, max_tokens: 3 });
    assertEquals(ok.status, 200);
    assertEquals(((await jsonOf(ok) as Json).usage as Json).completion_tokens, 3);
    const h = await jsonOf(await node.get("/health")) as { models: Json[] };
    assertEquals([h.models[0].in_flight, h.models[0].queue_depth], [0, 0]);
  });
});
