import { assert, assertEquals, assertNotEquals } from "../../tests/support/assert.ts";
import { argmax } from "../common/argmax.ts";
import { GREEDY, Sampler, type SamplingParams, topIds } from "./sampler.ts";

const params = (over: Partial<SamplingParams>): SamplingParams => ({ ...GREEDY, ...over });

function logitsOf(values: number[]): Float32Array {
  return Float32Array.from(values);
}

Deno.test("greedy picks the largest logit, lowest index on ties", () => {
  const s = new Sampler(GREEDY, 5);
  assertEquals(s.sample(logitsOf([1, 3, 2, 3, 0])).id, 1);
  assertEquals(argmax([0, 5, 5]), 1);
});

Deno.test("topIds returns the k best, best first", () => {
  assertEquals(topIds([3, 9, 1, 9, 7, 2], 3), [1, 3, 4]);
  assertEquals(topIds([1, 2], 5), [1, 0]);
});

function draws(p: SamplingParams, logits: Float32Array, n: number): number[] {
  const s = new Sampler(p, logits.length);
  return Array.from({ length: n }, () => s.sample(logits).id);
}

Deno.test("the same seed gives the same tokens; another seed gives others", () => {
  const logits = logitsOf(Array.from({ length: 50 }, (_, i) => Math.sin(i) * 2));
  const p = params({ temperature: 1, seed: 1234 });
  assertEquals(draws(p, logits, 64), draws(p, logits, 64));
  assertNotEquals(draws(p, logits, 64), draws({ ...p, seed: 99 }, logits, 64));
  // 64-bit seeds are accepted and folded, not truncated to the same value.
  assertNotEquals(draws({ ...p, seed: 2 ** 40 }, logits, 64), draws({ ...p, seed: 0 }, logits, 64));
});

Deno.test("sampling frequencies follow softmax(logits / T)", () => {
  const logits = logitsOf([2, 1, 0, -1]);
  for (const temperature of [0.5, 1, 2]) {
    const n = 20000;
    const counts = [0, 0, 0, 0];
    for (const id of draws(params({ temperature, seed: 7 }), logits, n)) counts[id]++;
    const w = [...logits].map((l) => Math.exp(l / temperature));
    const z = w.reduce((a, b) => a + b);
    w.forEach((wi, i) => {
      const expected = wi / z;
      const got = counts[i] / n;
      assert(
        Math.abs(got - expected) < 0.015,
        `T=${temperature} token ${i}: ${got} vs ${expected}`,
      );
    });
  }
});

Deno.test("top-k, top-p and min-p keep only the head of the distribution", () => {
  const logits = logitsOf([5, 4.9, 4.8, 0, -3]);
  const seen = (p: SamplingParams): Set<number> => new Set(draws(p, logits, 2000));
  assertEquals([...seen(params({ temperature: 1.5, topK: 1, seed: 1 }))], [0]);
  assertEquals([...seen(params({ temperature: 1.5, topK: 2, seed: 1 }))].sort(), [0, 1]);
  // The top three hold ~98% of the mass: top_p 0.9 excludes token 3 and 4.
  const topP = seen(params({ temperature: 1, topP: 0.9, seed: 2 }));
  assert(!topP.has(3) && !topP.has(4) && topP.has(2));
  assertEquals([...seen(params({ temperature: 1, topP: 0.01, seed: 2 }))], [0]);
  // min_p 0.5: tokens below half the best probability are dropped.
  const minP = seen(params({ temperature: 1, minP: 0.5, seed: 3 }));
  assert(minP.has(0) && minP.has(2) && !minP.has(3));
});

Deno.test("logit bias bans and forces tokens", () => {
  const logits = logitsOf([3, 2, 1]);
  assertEquals(new Sampler(params({ logitBias: new Map([[0, -100]]) }), 3).sample(logits).id, 1);
  assertEquals(new Sampler(params({ logitBias: new Map([[2, 100]]) }), 3).sample(logits).id, 2);
});

Deno.test("repetition penalty applies to prompt and output, presence/frequency to output only", () => {
  const logits = logitsOf([2.0, 1.9, -1]);
  // Token 0 is in the prompt: 2.0 / 1.2 < 1.9.
  assertEquals(new Sampler(params({ repetitionPenalty: 1.2 }), 3, [0]).sample(logits).id, 1);
  // Presence penalty ignores the prompt ...
  assertEquals(new Sampler(params({ presencePenalty: 1 }), 3, [0]).sample(logits).id, 0);
  // ... but not the output.
  const s = new Sampler(params({ presencePenalty: 0.5 }), 3);
  s.accept(0);
  assertEquals(s.sample(logits).id, 1);
  const f = new Sampler(params({ frequencyPenalty: 0.06 }), 3);
  f.accept(0);
  assertEquals(f.sample(logits).id, 0);
  f.accept(0);
  assertEquals(f.sample(logits).id, 1);
});

Deno.test("log-probs are those of the raw distribution", () => {
  const logits = logitsOf([1, 2, 3, 0]);
  const z = Math.log([...logits].reduce((a, l) => a + Math.exp(l), 0));
  const s = new Sampler(
    params({ logprobs: true, topLogprobs: 2, logitBias: new Map([[0, 50]]) }),
    4,
  );
  const out = s.sample(logits);
  assertEquals(out.id, 0);
  assert(Math.abs(out.logprob! - (1 - z)) < 1e-6);
  assertEquals(out.top!.map((t) => t.id), [2, 1]);
  assert(Math.abs(out.top![0].logprob - (3 - z)) < 1e-6);
});
