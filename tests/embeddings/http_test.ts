/**
 * The pooling routes over HTTP, through the `openai` client where it has them: embeddings
 * L2-normalised (llama.cpp's, normalised), as floats or base64, cut to `dimensions` and
 * normalised again; rerank results best first, `top_n` of them, with their documents when
 * asked; each model's kind in /models, /v1/models and its capabilities; a request to a
 * model of another kind, or out of bounds, refused with a 400 that says why; an unload
 * stops a pooling request in flight with its reason; n choices over chat and completions,
 * streamed or not.
 */

import OpenAI from "openai";
import { assert, assertEquals, assertStringIncludes } from "../support/assert.ts";
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { FIXTURES } from "../fixtures.ts";
import { pooledFixture, pooledFixtureDir } from "../fixtures/pooled/mod.ts";
import { nativeNode, parseSse, v1 } from "../native/support.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import { cosine, TEXTS } from "./support.ts";

type Json = Record<string, unknown>;

async function load(node: TestNode, path: string): Promise<string> {
  const res = await node.post("/models/load", { model_id: path, harness: "native" });
  assertEquals(res.status, 200, `load ${path}: ${await res.clone().text()}`);
  await res.body?.cancel();
  return path;
}

/** A node that may load the fixtures, the pooled ones, and files written to a temp dir. */
async function withPoolingNode(fn: (node: TestNode, dir: string) => Promise<void>): Promise<void> {
  pooledFixture("qwen3-embed-tiny-f16");
  pooledFixture("qwen3-rerank-tiny-f16");
  const dir = await Deno.makeTempDir();
  try {
    const roots = [FIXTURES, pooledFixtureDir(), dir];
    await withNode(nativeNode({ extra: { model_dirs: roots } }), (node) => fn(node, dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function norm(v: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  return Math.sqrt(s);
}

Deno.test("/v1/embeddings: llama.cpp's embeddings normalised, float or base64, dimensions", async () => {
  const path = pooledFixture("qwen3-embed-tiny-f16");
  using ref = await openLlamaModel(path);
  const expected = TEXTS.map((t) =>
    ref.embed(ref.tokenize(t, { special: true, addSpecial: true }))
  );
  await withPoolingNode(async (node) => {
    const model = await load(node, path);
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    const res = await client.embeddings.create({ model, input: TEXTS, encoding_format: "float" });
    assertEquals(res.data.map((d) => d.index), TEXTS.map((_, i) => i));
    res.data.forEach((d, i) => {
      assertEquals(d.embedding.length, 64);
      assert(Math.abs(norm(d.embedding) - 1) < 1e-5, `input ${i} normalised`);
      assert(cosine(d.embedding, expected[i]) >= 0.9999, `input ${i} is llama.cpp's`);
    });
    const tokens = TEXTS.reduce(
      (n, t) => n + ref.tokenize(t, { special: true, addSpecial: true }).length,
      0,
    );
    assertEquals(res.usage, { prompt_tokens: tokens, total_tokens: tokens });

    // The client's default is base64: little-endian float32s, the same vector.
    const b64 = await client.embeddings.create({ model, input: TEXTS[1] });
    assertEquals(b64.data[0].embedding, res.data[1].embedding);
    const raw = await jsonOf(
      await v1(node, "embeddings", {
        model,
        input: TEXTS[1],
        encoding_format: "base64",
      }),
    ) as { data: Array<{ embedding: string }> };
    assertEquals(typeof raw.data[0].embedding, "string");

    const cut = await client.embeddings.create({ model, input: TEXTS[1], dimensions: 16 });
    const head = res.data[1].embedding.slice(0, 16);
    const scale = 1 / norm(head);
    cut.data[0].embedding.forEach((x, i) =>
      assert(Math.abs(x - head[i] * scale) < 1e-6, `dim ${i}`)
    );
  });
});

Deno.test("/v1/rerank: best first, top_n, documents; kinds in /models; refusals say why", async () => {
  await withPoolingNode(async (node) => {
    const embedder = await load(node, pooledFixture("qwen3-embed-tiny-f16"));
    const reranker = await load(node, pooledFixture("qwen3-rerank-tiny-f16"));
    const text = await load(node, `${FIXTURES}/qwen3-tiny-q8_0.gguf`);
    const documents = ["Paris is in France.", "Bananas are yellow.", "Berlin is in Germany."];
    const all = await jsonOf(
      await v1(node, "rerank", {
        model: reranker,
        query: "capital of France",
        documents,
      }),
    ) as { results: Array<{ index: number; relevance_score: number }>; usage: Json };
    assertEquals(all.results.map((r) => r.index).sort(), [0, 1, 2]);
    const scores = all.results.map((r) => r.relevance_score);
    assertEquals(scores, [...scores].sort((a, b) => b - a), "best first");
    assert(scores.every((s) => s > 0 && s < 1), "probabilities of yes");
    const top = await jsonOf(
      await v1(node, "rerank", {
        model: reranker,
        query: "capital of France",
        documents: documents.map((d) => ({ text: d })),
        top_n: 2,
        return_documents: true,
      }),
    ) as { results: Array<{ index: number; document: { text: string } }>; usage: Json };
    assertEquals(top.results.map((r) => r.index), all.results.slice(0, 2).map((r) => r.index));
    assertEquals(
      top.results.map((r) => r.document.text),
      top.results.map((r) => documents[r.index]),
    );
    assertEquals(top.usage, all.usage);

    const kinds = await jsonOf(await node.get("/models")) as Array<Json>;
    const kindOf = (id: string) => kinds.find((m) => m.id === id)?.capabilities;
    assertEquals([kindOf(embedder), kindOf(reranker), kindOf(text)], [
      ["embeddings"],
      ["rerank"],
      ["text"],
    ]);
    const listed = await jsonOf(await node.get("/v1/models")) as { data: Json[] };
    assertEquals(listed.data.find((m) => m.id === embedder)?.capabilities, ["embeddings"]);
    const caps = await node.get(`/models/${encodeURIComponent(reranker)}/capabilities`);
    assertEquals(await jsonOf(caps), { capabilities: ["rerank"] });

    const msgs = [{ role: "user", content: "hi" }];
    const cases: Array<[string, string, Json, string, string | null, string]> = [
      [
        "chat to an embedding model",
        "chat/completions",
        { model: embedder, messages: msgs },
        "invalid_request",
        "model",
        "is an embedding model: it serves /v1/embeddings",
      ],
      [
        "completions to a reranker",
        "completions",
        { model: reranker, prompt: "a" },
        "invalid_request",
        "model",
        "is a reranker: it serves /v1/rerank",
      ],
      [
        "embeddings of a text model",
        "embeddings",
        { model: text, input: "a" },
        "invalid_request",
        "model",
        "is a text generation model",
      ],
      [
        "rerank on an embedding model",
        "rerank",
        { model: embedder, query: "q", documents: ["d"] },
        "invalid_request",
        "model",
        "not /v1/rerank",
      ],
      [
        "dimensions past the width",
        "embeddings",
        { model: embedder, input: "a", dimensions: 65 },
        "invalid_request_body",
        "dimensions",
        "have 64 dimensions",
      ],
      [
        "an empty input",
        "embeddings",
        { model: embedder, input: ["a", ""] },
        "invalid_request_body",
        "input[1]",
        "must not be empty",
      ],
      [
        "no inputs",
        "embeddings",
        { model: embedder, input: [] },
        "invalid_request_body",
        "input",
        "at least one input",
      ],
      [
        "2049 inputs",
        "embeddings",
        { model: embedder, input: Array(2049).fill("a") },
        "invalid_request_body",
        "input",
        "at most 2048 inputs",
      ],
      [
        "an unknown encoding",
        "embeddings",
        { model: embedder, input: "a", encoding_format: "int8" },
        "invalid_request_body",
        "encoding_format",
        "",
      ],
      [
        "a token outside the vocabulary",
        "embeddings",
        { model: embedder, input: [1, 999999] },
        "invalid_request",
        null,
        "outside the vocabulary",
      ],
      [
        "no documents",
        "rerank",
        { model: reranker, query: "q", documents: [] },
        "invalid_request_body",
        "documents",
        "at least one document",
      ],
      [
        "no query",
        "rerank",
        { model: reranker, documents: ["d"] },
        "invalid_request_body",
        "query",
        "",
      ],
      [
        "top_n 0",
        "rerank",
        { model: reranker, query: "q", documents: ["d"], top_n: 0 },
        "invalid_request_body",
        "top_n",
        "at least 1",
      ],
    ];
    for (const [what, route, body, code, param, message] of cases) {
      const res = await v1(node, route, body);
      const b = await jsonOf(res) as { error: Json };
      assertEquals(
        [res.status, b.error.code, b.error.param],
        [400, code, param],
        `${what}: ${JSON.stringify(b)}`,
      );
      assertStringIncludes(String(b.error.message), message, what);
    }
    // None of it disturbed the models.
    const ok = await v1(node, "embeddings", { model: embedder, input: "still here" });
    assertEquals(ok.status, 200);
    await ok.body?.cancel();
    const h = await jsonOf(await node.get("/health")) as { models: Json[] };
    assert(h.models.every((m) => m.in_flight === 0 && m.queue_depth === 0), JSON.stringify(h));
  });
});

Deno.test("n: 4 choices at temperature 1 differ, a seed reproduces them, streams end every choice", async () => {
  await withPoolingNode(async (node, dir) => {
    // Random weights: next-token distributions flat enough for sampling to tell choices apart.
    const path = `${dir}/flat-qwen3.gguf`;
    writeSyntheticQwen3(path, {
      shape: {
        hidden: 64,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        headDim: 16,
        ffn: 128,
        vocab: 151936,
        tiedOutput: true,
      },
      quant: "q8_0",
      seed: 3,
      vocabFrom: `${FIXTURES}/qwen3-vocab.gguf`,
    });
    const model = await load(node, path);
    const client = new OpenAI({ apiKey: "unused", baseURL: `${node.url}/v1`, maxRetries: 0 });
    const sampling = { temperature: 1, top_p: 1, top_k: 0, max_tokens: 8 } as const;
    const chat = (seed?: number) =>
      client.chat.completions.create(
        {
          model,
          messages: [{ role: "user", content: "Hello" }],
          n: 4,
          seed,
          ...sampling,
        } as OpenAI.ChatCompletionCreateParamsNonStreaming,
      );
    const first = await chat(11);
    assertEquals(first.choices.map((c) => c.index), [0, 1, 2, 3]);
    assertEquals(
      new Set(first.choices.map((c) => c.message.content)).size,
      4,
      "four different choices",
    );
    assertEquals(first.usage!.completion_tokens, 32, "every choice's tokens counted");
    const again = await chat(11);
    assertEquals(
      again.choices.map((c) => c.message.content),
      first.choices.map((c) => c.message.content),
    );
    assertEquals(new Set((await chat()).choices.map((c) => c.message.content)).size, 4);

    const completions = await client.completions.create({
      model,
      prompt: "Hello",
      n: 3,
      seed: 2,
      echo: true,
      ...sampling,
    });
    assertEquals(completions.choices.length, 3);
    assert(completions.choices.every((c) => c.text.startsWith("Hello")), "each choice echoes");
    assertEquals(completions.usage!.prompt_tokens, 1, "the prompt counted once");

    const res = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Hi" }],
      n: 3,
      stream: true,
      seed: 4,
      ...sampling,
    });
    const frames = parseSse(await res.text()).frames.map((f) => f.data as Json | string);
    assertEquals(frames.at(-1), "[DONE]");
    const chunks = frames.slice(0, -2) as Array<
      { choices: Array<{ index: number; finish_reason: string | null }> }
    >;
    const finished = chunks.flatMap((c) => c.choices).filter((c) => c.finish_reason !== null).map((
      c,
    ) => c.index);
    assertEquals(finished.sort(), [0, 1, 2], "a finish chunk for every choice");
    assertEquals(((frames.at(-2) as Json).usage as Json).completion_tokens, 24);
  });
});

Deno.test("an unload stops a pooling request in flight: 503 model_unloaded", async () => {
  await withPoolingNode(async (node) => {
    const model = await load(node, pooledFixture("qwen3-embed-tiny-f16"));
    // Two million tokens: no machine finishes them before the unload below lands.
    const input = Array.from({ length: 2048 }, (_, i) => `${i} ` + "word ".repeat(1000));
    const pending = v1(node, "embeddings", { model, input });
    await eventually(
      async () => {
        const h = await jsonOf(await node.get("/health")) as { models: Json[] };
        return h.models[0]?.in_flight === 1 ? true : undefined;
      },
      30_000,
      "the request to be admitted",
    );
    const unload = await node.post("/models/unload", { model_id: model });
    assertEquals(unload.status, 200);
    await unload.body?.cancel();
    const res = await pending;
    const b = await jsonOf(res) as { error: Json };
    assertEquals([res.status, b.error.code], [503, "model_unloaded"], JSON.stringify(b));
  });
});
