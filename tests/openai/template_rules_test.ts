/**
 * Models whose templates have rules (Mistral v0.3's alternating roles, Gemma 3's missing
 * tool turns): the tiny Qwen3 fixture given those real templates is loaded into a node. A
 * conversation the template refuses is a 400 `template_render_failed` saying the template's
 * reason; the same model serves a conversation it takes; /models says which of them read
 * tool calls.
 */

import { assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { fixture } from "../fixtures.ts";
import { nativeNode, v1 } from "../native/support.ts";
import { type Family, realTemplateOf } from "../chat/templates/mod.ts";
import { Kv } from "../../src/gguf/mod.ts";

type Json = Record<string, unknown>;

const CASES: [Family, unknown[], string][] = [
  [
    "mistral-v0.3",
    [{ role: "user", content: "a" }, { role: "user", content: "b" }],
    "After the optional system message, conversation roles must alternate " +
    "user/assistant/user/assistant/...",
  ],
  [
    "gemma3",
    [
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{
          id: "abcDEF123",
          type: "function",
          function: { name: "w", arguments: "{}" },
        }],
      },
      { role: "tool", tool_call_id: "abcDEF123", content: "18C" },
    ],
    "Conversation roles must alternate user/assistant/user/assistant/...",
  ],
];

Deno.test("a conversation a template refuses is a 400 with its reason; the model serves on", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const paths = CASES.map(([family]) =>
      writeVariant(fixture("qwen3-tiny-q8_0.gguf"), `${dir}/${family}.gguf`, (kv) => {
        kv.set("tokenizer.chat_template", Kv.string(realTemplateOf(family).source));
      })
    );
    await withNode(nativeNode({ extra: { model_dirs: [dir] } }), async (node) => {
      for (const [i, [family, messages, reason]] of CASES.entries()) {
        const model = paths[i];
        const load = await node.post("/models/load", { model_id: model, harness: "native" });
        assertEquals(load.status, 200, await load.text());
        for (const stream of [false, true]) {
          const res = await v1(node, "chat/completions", {
            model,
            messages,
            stream,
            max_tokens: 2,
          });
          const body = await jsonOf(res) as { error: Json };
          assertEquals(res.status, 400, `${family}: ${JSON.stringify(body)}`);
          assertEquals(body.error.code, "template_render_failed");
          assertEquals(
            body.error.message,
            `the model's chat template refused these messages: ${reason}`,
          );
        }
        const ok = await v1(node, "chat/completions", {
          model,
          messages: [{ role: "user", content: "Hello" }],
          tools: [{ type: "function", function: { name: "w" } }],
          max_tokens: 2,
        });
        assertEquals(ok.status, 200, `${family}: ${await ok.clone().text()}`);
        await ok.body?.cancel();
      }
      const models = await jsonOf(await node.get("/models")) as Json[];
      const toolCall = Object.fromEntries(models.map((m) => [m.id, m.tool_call]));
      assertEquals(toolCall, { [paths[0]]: true, [paths[1]]: false });
      assertEquals(models.map((m) => m.reasoning), [false, false]);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
