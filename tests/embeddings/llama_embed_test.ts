/**
 * Embeddings against llama.cpp (the live reference: same GGUF, same pooling): each input's
 * pooled final hidden state equals llama.cpp's, cosine ≥ 0.9999 for F16 and ≥ 0.999 for
 * Q8_0, one input per request and many batched in one; mean and first-token pooling
 * (variants of the fixture), a mean-pooled input longer than a step, inputs given as token
 * ids. Neuron makes of each text the tokens llama.cpp makes.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { type PooledFixture, pooledFixture } from "../fixtures/pooled/mod.ts";
import { FrontEnd } from "../../src/frontend/mod.ts";
import { Kv, openGguf } from "../../src/gguf/mod.ts";
import { cosine, openSession, pool, TEXTS } from "./support.ts";

const CASES: Array<[PooledFixture, number]> = [
  ["qwen3-embed-tiny-f16", 0.9999],
  ["qwen3-embed-tiny-q8_0", 0.999],
];

/** The ids neuron's front end makes of each text, read from the file alone. */
async function neuronTokens(path: string, texts: string[]): Promise<number[][]> {
  const file = openGguf(path);
  try {
    return await FrontEnd.fromGguf(file).poolPrompts(texts.map((text) => ({ kind: "text", text })));
  } finally {
    file.close();
  }
}

for (const [name, floor] of CASES) {
  Deno.test(`${name}: last-token embeddings equal llama.cpp's, one per request and batched`, async () => {
    const path = pooledFixture(name);
    using ref = await openLlamaModel(path);
    const tokens = TEXTS.map((t) => ref.tokenize(t, { special: true, addSpecial: true }));
    assertEquals(await neuronTokens(path, TEXTS), tokens, "tokens of each text");
    assert(tokens.every((ids) => ids.at(-1) === 151643), "every input ends with <|endoftext|>");
    const expected = tokens.map((ids) => ref.embed(ids));

    const session = openSession(path);
    try {
      for (const [i, text] of TEXTS.entries()) {
        const { vectors, promptTokens } = await pool(session, [{ kind: "text", text }]);
        assertEquals(promptTokens, tokens[i].length);
        const c = cosine(vectors[0], expected[i]);
        assert(c >= floor, `input ${i} alone: cosine ${c} < ${floor}`);
      }
      const before = session.stats().steps;
      const batched = await pool(session, TEXTS.map((text) => ({ kind: "text", text })));
      const steps = session.stats().steps - before;
      // One step per input would be 12; packed, the budget's ramp from 64 tokens takes 3.
      assert(steps <= 4, `${TEXTS.length} inputs took ${steps} steps`);
      assertEquals(batched.promptTokens, tokens.reduce((n, ids) => n + ids.length, 0));
      batched.vectors.forEach((v, i) => {
        const c = cosine(v, expected[i]);
        assert(c >= floor, `input ${i} batched: cosine ${c} < ${floor}`);
      });
      // Token ids embed as the text they came from does.
      const byIds = await pool(session, tokens.map((ids) => ({ kind: "tokens", ids })));
      byIds.vectors.forEach((v, i) => assert(cosine(v, expected[i]) >= floor, `ids ${i}`));
    } finally {
      session.close();
    }
  });
}

for (const [pooling, type] of [["mean", 1], ["cls", 2]] as const) {
  Deno.test(`qwen3 with pooling_type ${type} (${pooling}): llama.cpp's embeddings, chunked or not`, async () => {
    const dir = await Deno.makeTempDir();
    try {
      const path = writeVariant(
        pooledFixture("qwen3-embed-tiny-f16"),
        `${dir}/${pooling}.gguf`,
        (kv) => kv.set("qwen3.pooling_type", Kv.u32(type)),
      );
      using ref = await openLlamaModel(path);
      const long = TEXTS.join(" ");
      const texts = [...TEXTS, long];
      const expected = texts.map((t) =>
        ref.embed(ref.tokenize(t, { special: true, addSpecial: true }))
      );
      assert(ref.tokenize(long, { special: true, addSpecial: true }).length > 64);
      // Steps of at most 32 tokens: the long input (and others) pool over several.
      for (const maxBatchTokens of [512, 32]) {
        const session = openSession(path, { maxBatchTokens });
        try {
          const { vectors } = await pool(session, texts.map((text) => ({ kind: "text", text })));
          vectors.forEach((v, i) => {
            const c = cosine(v, expected[i]);
            assert(c >= 0.9999, `${pooling}, steps of ${maxBatchTokens}: input ${i} cosine ${c}`);
          });
        } finally {
          session.close();
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
