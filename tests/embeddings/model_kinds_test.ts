/**
 * What a file is for, read from its metadata as llama.cpp reads it: text, embeddings
 * (pooling_type mean/cls/last), rerank (rank pooling with a cls.output head, or a Qwen3
 * reranker converted as a causal LM), and the files neuron refuses at load, each naming
 * what it cannot run: non-causal attention, an unknown pooling type, a rank head missing,
 * a dense classification layer, labels that do not match the head.
 */

import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { pooledFixture } from "../fixtures/pooled/mod.ts";
import { type GgufKv, Kv, openGguf } from "../../src/gguf/mod.ts";
import { ModelError } from "../../src/models/errors.ts";
import type { ModelPooling } from "../../src/models/pooling.ts";
import { QWEN3_RERANKER_PROMPT } from "../../src/models/pooling.ts";
import { readModel } from "../../src/models/registry.ts";

function poolingOf(path: string): ModelPooling {
  const file = openGguf(path);
  try {
    return readModel(file).pooling;
  } finally {
    file.close();
  }
}

async function withVariant<T>(
  src: string,
  edit: (kv: Map<string, GgufKv>) => void,
  fn: (path: string) => T,
): Promise<T> {
  const dir = await Deno.makeTempDir();
  try {
    return fn(writeVariant(src, `${dir}/variant.gguf`, edit));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("kinds: text, embeddings by pooling type, rerank by rank pooling or by name", async () => {
  const text = poolingOf(fixture("qwen3-tiny-q8_0.gguf"));
  assertEquals([text.kind, text.pooling, text.rankHead], ["text", null, null]);
  const embed = poolingOf(pooledFixture("qwen3-embed-tiny-f16"));
  assertEquals([embed.kind, embed.pooling], ["embeddings", "last"]);
  for (const [type, pooling] of [[1, "mean"], [2, "cls"], [3, "last"]] as const) {
    const p = await withVariant(fixture("qwen3-tiny-f16.gguf"), (kv) => {
      kv.set("qwen3.pooling_type", Kv.u32(type));
    }, poolingOf);
    assertEquals([p.kind, p.pooling], ["embeddings", pooling]);
  }
  const rank = poolingOf(pooledFixture("qwen3-rerank-tiny-f16"));
  assertEquals([rank.kind, rank.pooling, rank.rankHead?.labels], ["rerank", "last", ["yes", "no"]]);
  assertEquals(rank.rerankPrompt, QWEN3_RERANKER_PROMPT);
  const scores = rank.rankHead!.score(new Float32Array(64).fill(0.1));
  assert(Math.abs(scores[0] + scores[1] - 1) < 1e-6, "Qwen3's head is softmaxed");

  // Named a reranker, converted as a causal LM: the output matrix's yes/no rows, the card's prompt.
  const named = await withVariant(fixture("qwen3-tiny-f16.gguf"), (kv) => {
    kv.set("general.basename", Kv.string("Qwen3-Reranker"));
  }, poolingOf);
  assertEquals([named.kind, named.pooling, named.rerankPrompt], [
    "rerank",
    "last",
    QWEN3_RERANKER_PROMPT,
  ]);
  const h = new Float32Array(64).map((_, i) => Math.sin(i));
  const [a, b] = [rank.rankHead!.score(h), named.rankHead!.score(h)];
  assert(Math.abs(a[0] - b[0]) < 1e-3, `the same head: ${a[0]} vs ${b[0]}`);
  // pooling_type none says text, whatever the name.
  const none = await withVariant(fixture("qwen3-tiny-f16.gguf"), (kv) => {
    kv.set("general.basename", Kv.string("Qwen3-Reranker"));
    kv.set("qwen3.pooling_type", Kv.u32(0));
  }, poolingOf);
  assertEquals(none.kind, "rerank", "none is llama.cpp's default too: the name decides");
});

Deno.test("files neuron cannot pool are refused at load, naming why", async () => {
  const cases: Array<[string, string, (kv: Map<string, GgufKv>) => void, string, string]> = [
    [
      "non-causal attention",
      fixture("qwen3-tiny-f16.gguf"),
      (kv) => kv.set("qwen3.attention.causal", Kv.bool(false)),
      "unsupported_attention",
      "non-causal attention is not supported",
    ],
    [
      "an unknown pooling type",
      fixture("qwen3-tiny-f16.gguf"),
      (kv) => kv.set("qwen3.pooling_type", Kv.u32(9)),
      "unsupported_pooling",
      "qwen3.pooling_type is 9",
    ],
    [
      "rank pooling without a head",
      fixture("qwen3-tiny-f16.gguf"),
      (kv) => kv.set("qwen3.pooling_type", Kv.u32(4)),
      "unsupported_pooling",
      "no cls.output.weight",
    ],
    [
      "labels the head does not have",
      pooledFixture("qwen3-rerank-tiny-f16"),
      (kv) => kv.set("qwen3.classifier.output_labels", Kv.strings(["yes", "no", "maybe"])),
      "bad_tensor_shape",
      "names 3 outputs, cls.output.weight has 2",
    ],
  ];
  for (const [what, src, edit, code, text] of cases) {
    await withVariant(src, edit, (path) => {
      const err = assertThrows(() => poolingOf(path), ModelError);
      assertEquals(err.code, code, what);
      assert(err.message.includes(text), `${what}: ${err.message}`);
    });
  }
});
