/**
 * Scoring on `/v1/completions`: `echo` with `logprobs` hands the prompt back with the
 * log-prob of every token after the first (the first's is null), each within 1e-3 of the
 * log-softmax of llama.cpp's logits at the position before it (relative beyond -1: see
 * TOLERANCE), with the most likely token as the one alternative; `max_tokens: 0` scores
 * without generating. Then the request lm-evaluation-harness's `local-completions` sends
 * for a log-likelihood (token ids, `echo`, `logprobs: 1`, `max_tokens: 1`), read as it
 * reads it, through the `openai` client.
 */

import OpenAI from "openai";
import { assert, assertEquals } from "../support/assert.ts";
import { withNode } from "../support/node.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import { loadFixture, nativeNode } from "../native/support.ts";

/**
 * 1e-3, of the log-prob's size where it is below -1. llama.cpp rounds activations to F16
 * before F16 products, so its logits are off by up to ~0.02 (the fixtures' README allows
 * 0.05): a token the model gives -60 differs by about 1e-2, 2e-4 of it. Log-probs near 0,
 * what a likely continuation sums, differ by far less than 1e-3.
 */
const TOLERANCE = 1e-3;

function close(got: number, want: number): boolean {
  return Math.abs(got - want) <= TOLERANCE * Math.max(1, Math.abs(want));
}

/** Per position p, the log-prob of token p + 1 and the best log-prob (llama.cpp's logits). */
async function reference(ids: number[]): Promise<{ chosen: number[]; best: number[] }> {
  using ref = await openLlamaModel(fixture("qwen3-tiny-f16.gguf"));
  const chosen: number[] = [], best: number[] = [];
  ref.eachPosition(ids, (p, logits) => {
    if (p + 1 >= ids.length) return;
    let max = -Infinity, sum = 0;
    for (const l of logits) max = Math.max(max, l);
    for (const l of logits) sum += Math.exp(l - max);
    const logZ = max + Math.log(sum);
    chosen.push(logits[ids[p + 1]] - logZ);
    best.push(max - logZ);
  });
  return { chosen, best };
}

Deno.test("echo: the prompt's log-probs are llama.cpp's log-softmax, chunked or not", async () => {
  const golden = modelGolden("qwen3-tiny-f16");
  const fox = golden.prompts.find((p) => p.name === "text_fox")!;
  const long = golden.prompts.find((p) => p.name === "chat_tools")!;
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-f16.gguf");
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    // A text prompt, and one of 182 token ids: scored over several steps.
    for (const [prompt, ids] of [[fox.text!, fox.tokens], [long.tokens, long.tokens]] as const) {
      const { chosen, best } = await reference(ids);
      const res = await client.completions.create({
        model,
        prompt: prompt as string | number[],
        echo: true,
        logprobs: 1,
        max_tokens: 0,
      });
      const [choice] = res.choices;
      const lp = choice.logprobs!;
      if (typeof prompt === "string") assertEquals(choice.text, prompt);
      assertEquals([choice.finish_reason, lp.tokens!.length], ["length", ids.length]);
      assertEquals([lp.token_logprobs![0], lp.top_logprobs![0]], [null, null]);
      chosen.forEach((want, p) => {
        const got = lp.token_logprobs![p + 1];
        assert(close(got, want), `token ${p + 1}: ${got} vs llama.cpp's ${want}`);
        const top = Object.values(lp.top_logprobs![p + 1]);
        assertEquals(top.length, 1);
        assert(close(top[0], best[p]), `best at ${p}: ${top[0]} vs ${best[p]}`);
      });
      assertEquals(res.usage, {
        prompt_tokens: ids.length,
        completion_tokens: 0,
        total_tokens: ids.length,
      });
    }
  });
});

Deno.test("lm-evaluation-harness: a log-likelihood request answered as local-completions reads it", async () => {
  const golden = modelGolden("qwen3-tiny-f16");
  const hello = golden.prompts.find((p) => p.name === "chat_hello")!;
  const context = hello.tokens;
  // The model's own continuation (greedy), and one it would not write.
  const greedy = hello.greedy.slice(0, 5).map((s) => s.id);
  const other = [1000, 2000, 3000, 4000, 5000];
  await withNode(nativeNode(), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-f16.gguf");
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    for (const [continuation, greedyExpected] of [[greedy, true], [other, false]] as const) {
      const ids = [...context, ...continuation];
      const { chosen } = await reference(ids);
      // local-completions' payload for loglikelihood requests.
      const res = await client.completions.create({
        model,
        prompt: [ids],
        temperature: 0,
        max_tokens: 1,
        logprobs: 1,
        seed: 1234,
        echo: true,
      });
      // parse_logprobs: the continuation's tokens, the generated one dropped.
      const ctxlen = context.length;
      const lp = res.choices[0].logprobs!;
      const tokens = lp.token_logprobs!.slice(ctxlen, -1);
      const tops = lp.top_logprobs!.slice(ctxlen, -1);
      assertEquals(tokens.length, continuation.length);
      chosen.slice(ctxlen - 1).forEach((want, i) => {
        assert(close(tokens[i], want), `continuation ${i}: ${tokens[i]} vs ${want}`);
      });
      if (greedyExpected) {
        // The model's own continuation: log-probs near 0, within 1e-3 of llama.cpp's outright.
        assert(tokens.every((t) => t > -1), `greedy continuation log-probs ${tokens}`);
      }
      const isGreedy = tokens.every((t, i) => t === Math.max(...Object.values(tops[i])));
      assertEquals(isGreedy, greedyExpected);
    }
  });
});
