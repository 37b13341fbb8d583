/**
 * `reasoning_effort` on chat completions means what `reasoning.effort` means on the
 * Responses API: "none" and "minimal" render the prompt without thinking, every other
 * effort with it; `chat_template_kwargs.enable_thinking` still wins. Qwen3's template
 * renders an empty think block when thinking is off, so the prompt's token count shows
 * which way it went.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, v1 } from "../native/support.ts";

type Json = Record<string, unknown>;

Deno.test("reasoning_effort: none/minimal render without thinking, high with it; bad values 400", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const messages = [{ role: "user", content: "Hello!" }];
    const promptTokens = async (
      route: string,
      body: Json,
      headers: Record<string, string> = {},
    ): Promise<number> => {
      const res = await v1(node, route, { model, max_tokens: 1, ...body }, headers);
      const json = await jsonOf(res) as Json;
      assertEquals(res.status, 200, JSON.stringify(json));
      const usage = json.usage as Json;
      return (usage.prompt_tokens ?? usage.input_tokens) as number;
    };
    const chat = (body: Json, headers?: Record<string, string>) =>
      promptTokens("chat/completions", { messages, ...body }, headers);
    const off = await chat({ chat_template_kwargs: { enable_thinking: false } });
    const on = await chat({ chat_template_kwargs: { enable_thinking: true } });
    assert(off !== on, "thinking changes the rendered prompt");

    const thinkingHeader = { "x-include-thinking": "1" };
    assertEquals(await chat({ reasoning_effort: "none" }, thinkingHeader), off);
    assertEquals(await chat({ reasoning_effort: "minimal" }, thinkingHeader), off);
    assertEquals(await chat({ reasoning_effort: "high" }), on);
    assertEquals(
      await chat({ reasoning_effort: "high", chat_template_kwargs: { enable_thinking: false } }),
      off,
    );
    const responses = (effort: string) =>
      promptTokens("responses", { input: "Hello!", reasoning: { effort } });
    assertEquals([await responses("none"), await responses("high")], [off, on]);

    for (
      const [route, body, param] of [
        ["chat/completions", { messages, reasoning_effort: "extreme" }, "reasoning_effort"],
        ["responses", { input: "x", reasoning: { effort: "extreme" } }, "reasoning.effort"],
      ] as const
    ) {
      const res = await v1(node, route, { model, ...body });
      const err = (await jsonOf(res) as { error: Json }).error;
      assertEquals([res.status, err.code, err.param], [400, "invalid_request_body", param]);
    }
  });
});
