/**
 * Rerank scores against llama.cpp on 20 query/document sets: the Qwen3-Reranker fixture
 * (rank pooling, cls.output head, rerank prompt in the file) scored as llama.cpp's rank
 * pooling scores it, and the same model converted as a plain causal LM (no pooling type,
 * named a reranker) scored from llama.cpp's yes/no logits after the model card's prompt.
 * Each score is within 3e-4 of llama.cpp's (it computes F16 products on F16-rounded
 * activations), and every two documents whose llama.cpp scores differ by more than that
 * are ordered as llama.cpp orders them.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { type LlamaModel, openLlamaModel } from "../support/llama_ref.ts";
import { pooledFixture } from "../fixtures/pooled/mod.ts";
import { fixture } from "../fixtures.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { FrontEnd } from "../../src/frontend/mod.ts";
import { Kv, openGguf } from "../../src/gguf/mod.ts";
import { QWEN3_RERANKER_PROMPT } from "../../src/models/pooling.ts";
import { openSession, pool } from "./support.ts";
import { RERANK_SETS } from "./rerank_sets.ts";

const TOLERANCE = 3e-4;

function promptOf(query: string, document: string): string {
  return QWEN3_RERANKER_PROMPT.replaceAll("{query}", query).replaceAll("{document}", document);
}

/**
 * Checks neuron's scores of every set against `expected` (llama.cpp's); returns how many
 * pairs of documents were far enough apart to have their order checked.
 */
async function checkSets(
  path: string,
  expected: (query: string, document: string) => number,
): Promise<number> {
  const session = openSession(path);
  let decided = 0;
  try {
    for (const [s, set] of RERANK_SETS.entries()) {
      const want = set.documents.map((d) => expected(set.query, d));
      const { scores } = await pool(
        session,
        set.documents.map((document) => ({ kind: "pair", query: set.query, document })),
      );
      scores.forEach((x, i) => {
        const d = Math.abs(x - want[i]);
        assert(d <= TOLERANCE, `set ${s} document ${i}: ${x} vs llama.cpp's ${want[i]}`);
      });
      for (let i = 0; i < want.length; i++) {
        for (let j = 0; j < want.length; j++) {
          if (want[i] - want[j] <= TOLERANCE) continue;
          decided++;
          assert(scores[i] > scores[j], `set ${s}: documents ${i} and ${j} in the wrong order`);
        }
      }
    }
  } finally {
    session.close();
  }
  return decided;
}

Deno.test("rank pooling: Qwen3-Reranker scores and order as llama.cpp's on 20 sets", async () => {
  const path = pooledFixture("qwen3-rerank-tiny-f16");
  using ref = await openLlamaModel(path);
  assertEquals(ref.nClsOut, 2);
  const tokens = (q: string, d: string) =>
    ref.tokenize(promptOf(q, d), { special: true, addSpecial: false });
  const file = openGguf(path);
  try {
    const set = RERANK_SETS[0];
    const ours = await FrontEnd.fromGguf(file, undefined, QWEN3_RERANKER_PROMPT).poolPrompts(
      set.documents.map((document) => ({ kind: "pair", query: set.query, document })),
    );
    assertEquals(ours, set.documents.map((d) => tokens(set.query, d)), "prompt tokens");
  } finally {
    file.close();
  }
  const decided = await checkSets(path, (q, d) => ref.embed(tokens(q, d))[0]);
  // Of the 200 pairs of documents, all but near-ties are checked.
  assert(decided >= 180, `only ${decided} of 200 document pairs are ordered`);
});

/** softmax(yes, no)[yes] of llama.cpp's logits after the prompt. */
function yesProbability(ref: LlamaModel, q: string, d: string): number {
  const id = (word: string): number => ref.tokenize(word, { special: false, addSpecial: false })[0];
  const logits = ref.logits(ref.tokenize(promptOf(q, d), { special: true, addSpecial: false }));
  return 1 / (1 + Math.exp(logits[id("no")] - logits[id("yes")]));
}

Deno.test("a Qwen3-Reranker converted as a causal LM is scored from its yes/no logits", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = writeVariant(fixture("qwen3-tiny-f16.gguf"), `${dir}/reranker.gguf`, (kv) => {
      kv.set("general.name", Kv.string("Qwen3-Reranker-0.6B"));
    });
    using ref = await openLlamaModel(path);
    const decided = await checkSets(path, (q, d) => yesProbability(ref, q, d));
    assert(decided >= 180, `only ${decided} of 200 document pairs are ordered`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
