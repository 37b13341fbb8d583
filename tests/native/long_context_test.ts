/**
 * A 32k-token conversation through the API (the tiny Qwen3 fixture: its context is 40960):
 * the first turn completes, and the follow-up turn, which repeats it, is served from the
 * prefix cache for all but its new tokens, with an f16 and a q8_0 cache.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { loadFixture, nativeNode, v1 } from "./support.ts";

/** Lowercase words: about 2.7 tokens each with this vocabulary. */
function prose(words: number, seed: number): string {
  let s = seed;
  return Array.from({ length: words }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return "abcdefghijklmnopqrstuvwxyz".repeat(2).slice(s % 26, s % 26 + 3 + (s >>> 8) % 7);
  }).join(" ");
}

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

for (const kvType of ["f16", "q8_0"] as const) {
  Deno.test(`api: a 32k-token prompt completes, and its follow-up turn is ≥ 99% cached (${kvType} KV)`, async () => {
    const node = nativeNode({ contextLength: 40960, extra: { kv_type: kvType } });
    await withNode(node, async (node) => {
      const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
      const messages = [{ role: "user", content: prose(12000, 5) }];
      const first = await v1(node, "chat/completions", { model, messages, max_tokens: 8 });
      const a = await jsonOf(first) as {
        usage: Usage;
        choices: { message: { content: string } }[];
      };
      assertEquals(first.status, 200, JSON.stringify(a));
      assert(a.usage.prompt_tokens > 30000, `prompt of ${a.usage.prompt_tokens} tokens`);
      const followUp = [
        ...messages,
        { role: "assistant", content: a.choices[0].message.content },
        { role: "user", content: "And then?" },
      ];
      const second = await v1(node, "chat/completions", {
        model,
        messages: followUp,
        max_tokens: 8,
      });
      const b = await jsonOf(second) as { usage: Usage };
      assertEquals(second.status, 200, JSON.stringify(b));
      const cached = b.usage.prompt_tokens_details?.cached_tokens ?? 0;
      assert(
        cached >= 0.99 * b.usage.prompt_tokens,
        `${cached} of ${b.usage.prompt_tokens} prompt tokens cached`,
      );
    });
  });
}
