/**
 * Prompts far longer than the context: one whose bytes alone prove it cannot fit is
 * refused without being tokenized; one that must be tokenized to tell is tokenized a slice
 * at a time, so a short request sent after it is served first.
 */

import { assertEquals, assertStringIncludes } from "../support/assert.ts";
import { jsonOf, withNode } from "../support/node.ts";
import { fixture } from "../fixtures.ts";
import { loadFixture, nativeNode, v1 } from "./support.ts";
import { GREEDY } from "../../src/engine/mod.ts";
import type { GenerateRequest } from "../../src/frontend/mod.ts";
import { ModelHost, type ModelRequestError } from "../../src/harness/native/model_host.ts";

/** Words of 3-9 letters: about 1.5 tokens each, 6.5 bytes. */
function prose(bytes: number): string {
  let s = 7;
  const words: string[] = [];
  let n = 0;
  while (n < bytes) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const w = "abcdefghijklmnopqrstuvwxyz".repeat(2).slice(s % 26, s % 26 + 3 + (s >>> 8) % 7);
    words.push(w);
    n += w.length + 1;
  }
  return words.join(" ");
}

Deno.test("long prompts: 15 MB is refused from its size; a short request beside it is served", async () => {
  await withNode(nativeNode({ contextLength: 1024 }), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const huge = prose(15 * 1024 * 1024);
    const big = v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: huge }],
      max_tokens: 4,
    });
    const sentAt = performance.now();
    const small = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 4,
    });
    const smallMs = performance.now() - sentAt;
    assertEquals(small.status, 200, await small.clone().text());
    await small.body?.cancel();
    const res = await big;
    const body = await jsonOf(res) as { error: { code: string; message: string } };
    assertEquals([res.status, body.error.code], [400, "context_length_exceeded"]);
    // Counted from its bytes, not tokenized: "at least".
    assertStringIncludes(body.error.message, "the prompt has at least");
    console.log(`a 4-token request beside a 15 MB prompt: ${smallMs.toFixed(0)} ms`);
  });
});

Deno.test("long prompts: one tokenized in slices lets a later short request finish first", async () => {
  const host = await ModelHost.start({
    modelPath: fixture("qwen3-tiny-q8_0.gguf"),
    device: "cpu",
    threads: 1,
    contextLength: 4096,
    maxSequences: 4,
    maxBatchTokens: 256,
    kvDtype: "f16",
  });
  try {
    const request = (id: string, text: string): GenerateRequest => ({
      id,
      prompt: { kind: "text", text },
      maxTokens: 4,
      sampling: GREEDY,
      ignoreEos: true,
    });
    // Under 4096 tokens x the longest token's bytes, so only tokenizing tells; ~80k tokens.
    const order: string[] = [];
    const big = host.generate(request("big", prose(500_000))).then(
      () => order.push("big accepted"),
      (err: unknown) => order.push(`big refused: ${(err as ModelRequestError).code}`),
    );
    const stream = await host.generate(request("small", "Hello there"));
    let tokens = 0;
    for await (const e of stream) if (e.type === "delta") tokens += e.tokens.length;
    order.push("small done");
    await big;
    assertEquals([tokens, order], [4, ["small done", "big refused: context_length_exceeded"]]);
  } finally {
    await host.close();
  }
});
