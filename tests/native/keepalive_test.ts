/**
 * A stream whose prefill takes longer than a second sends SSE comments while nothing
 * else is sent, so proxies and clients do not time out. The slow pure-TypeScript backend
 * makes a real prefill of the 600-token golden prompt last a few seconds.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { withNode } from "../support/node.ts";
import { modelGolden } from "../fixtures.ts";
import { loadFixture, nativeNode, parseSse, v1 } from "./support.ts";

Deno.test("keep-alive: comments every second during a long prefill, then the tokens", async () => {
  const config = nativeNode({ contextLength: 2048, extra: { device: "reference" } });
  await withNode(config, async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");
    const prompt = modelGolden("qwen3-tiny-q8_0").prompts.find((p) => p.name === "raw_random600")!;
    const started = performance.now();
    const res = await v1(node, "completions", {
      model,
      prompt: [...prompt.tokens, ...prompt.tokens, ...prompt.tokens],
      max_tokens: 2,
      temperature: 0,
      stream: true,
    });
    assertEquals(res.status, 200);
    const body = await res.text();
    const seconds = (performance.now() - started) / 1000;
    const { frames, comments } = parseSse(body);
    assert(seconds > 1.5, `the prefill was too fast (${seconds.toFixed(2)} s) to need keep-alives`);
    assert(
      comments >= 1 && comments >= Math.floor(seconds) - 1,
      `${comments} comments in ${seconds.toFixed(1)} s`,
    );
    assert(body.startsWith(":"), "the wait before the first token is filled with comments");
    assertEquals(frames.at(-1)!.data, "[DONE]");
  });
});
