/**
 * The official `openai` client's structured-output helpers against neuron, on the
 * random-weight fixture: `chat.completions.parse` with `zodResponseFormat` and
 * `responses.parse` with `zodTextFormat` get content that the zod schema itself parses,
 * and a function tool forced by name comes back as a call whose arguments the tool's
 * schema takes.
 */
import OpenAI from "openai";
import { zodFunction, zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { assert, assertEquals } from "../support/assert.ts";
import { withNode } from "../support/node.ts";
import { loadFixture, nativeNode } from "../native/support.ts";

const Weather = z.object({
  city: z.enum(["Paris", "Oslo", "Zürich"]),
  celsius: z.int().min(-40).max(50),
  sunny: z.boolean(),
  note: z.string().max(12),
  hours: z.array(z.int().min(0).max(23)).max(3),
});

const Lookup = z.object({ q: z.string().max(10), limit: z.int().min(1).max(5) });

Deno.test("openai client: parse with zod schemas, forced function calls", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "user", content: "What is the weather?" },
    ];

    for (const temperature of [0, 1]) {
      const completion = await client.chat.completions.parse({
        model,
        messages,
        temperature,
        seed: 3,
        max_completion_tokens: 400,
        response_format: zodResponseFormat(Weather, "weather"),
      });
      const choice = completion.choices[0];
      assertEquals(choice.finish_reason, "stop");
      const parsed = choice.message.parsed;
      assert(parsed !== null, choice.message.content ?? "");
      assertEquals(Weather.parse(parsed), parsed);
    }

    const response = await client.responses.parse({
      model,
      input: "What is the weather?",
      max_output_tokens: 400,
      text: { format: zodTextFormat(Weather, "weather") },
    });
    assertEquals(response.status, "completed");
    assert(response.output_parsed !== null);
    Weather.parse(response.output_parsed);

    const called = await client.chat.completions.parse({
      model,
      messages,
      max_completion_tokens: 300,
      tools: [zodFunction({ name: "lookup", parameters: Lookup })],
      tool_choice: { type: "function", function: { name: "lookup" } },
    });
    const calls = called.choices[0].message.tool_calls ?? [];
    assertEquals(called.choices[0].finish_reason, "tool_calls");
    assertEquals(calls.length, 1);
    const call = calls[0];
    assert(call.type === "function");
    assertEquals(call.function.name, "lookup");
    Lookup.parse(JSON.parse(call.function.arguments));
    assertEquals(call.function.parsed_arguments, Lookup.parse(JSON.parse(call.function.arguments)));
  });
});
