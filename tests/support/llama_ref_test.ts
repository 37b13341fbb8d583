/**
 * The live llama.cpp reference reproduces the frozen llama.cpp goldens (produced by another
 * llama.cpp build, and checked there by a float64 forward pass): greedy ids, per-position
 * argmax, top-20 and full last-position logits of every Qwen3 fixture, and the tokenizer's
 * ids for all 105 corpus strings. If it does, new families can be checked against it live.
 */

import { assert, assertEquals } from "./assert.ts";
import { fixture, LOGIT_TOLERANCE, MODEL_FIXTURES, modelGolden } from "../fixtures.ts";
import { type LlamaModel, LlamaRefError, openLlamaModel, topLogits } from "./llama_ref.ts";
import { checkedContextDefaults, CONTEXT } from "./llama_cpp/abi.ts";
import { pooledFixture } from "../fixtures/pooled/mod.ts";
import { dequantize, openGguf } from "../../src/gguf/mod.ts";

interface TokenizerCase {
  name: string;
  text: string;
  llama_cpp: {
    parse_special: number[];
    no_parse_special: number[];
    decode_roundtrip_parse_special: boolean;
  };
}

function maxDiff(logits: Float32Array, expected: Array<[number, number]>): number {
  return Math.max(...expected.map(([id, l]) => Math.abs(logits[id] - l)));
}

async function assertRefError(fn: () => unknown, code: string): Promise<void> {
  try {
    await fn();
  } catch (err) {
    assert(err instanceof LlamaRefError, `expected LlamaRefError, got ${err}`);
    assertEquals(err.code, code, err.message);
    return;
  }
  throw new Error(`expected LlamaRefError ${code}, nothing was thrown`);
}

for (const name of MODEL_FIXTURES) {
  Deno.test(`llama_ref reproduces the ${name} goldens`, async (t) => {
    const golden = modelGolden(name);
    const tolerance = LOGIT_TOLERANCE[name];
    // The goldens' context: 1024 tokens, ubatches of 512 (raw_random600 spans two), and
    // their 2 threads: with one, llama.cpp's greedy continuations of raw_random600 and
    // chat_tool_result on the q4_0 and q4_k_m fixtures leave the goldens' within 30 steps.
    using model = await openLlamaModel(fixture(`${name}.gguf`), {
      contextLength: 1024,
      threads: 2,
    });
    for (const p of golden.prompts) {
      await t.step(p.name, () => {
        if (p.text !== undefined) {
          const ids = model.tokenize(p.text, { special: true, addSpecial: true });
          assertEquals(ids, p.tokens, "tokens of the prompt text");
        }
        const steps = model.greedy(p.tokens, p.greedy.length);
        assertEquals(steps.map((s) => s.id), p.greedy.map((g) => g.id), "greedy ids");
        steps.forEach((s, k) => {
          const ours = new Map(s.top5);
          for (const [id, logit] of p.greedy[k].top5) {
            const d = Math.abs((ours.get(id) ?? Infinity) - logit);
            assert(d <= tolerance, `greedy step ${k}: logit of ${id} differs by ${d}`);
          }
        });
        // As the goldens were made: the whole prompt in one batch, logits at every position.
        const argmaxes: number[] = [];
        let last: Float32Array = new Float32Array(0);
        model.eachPosition(p.tokens, (_, logits) => {
          argmaxes.push(topLogits(logits, 1)[0][0]);
          last = logits;
        });
        assertEquals(argmaxes, p.argmax_per_position, "argmax per position");
        const d = maxDiff(last, p.last_topk);
        assert(d <= tolerance, `top-20 logits differ by ${d} > ${tolerance}`);
      });
    }
    await t.step("all logits at the last position of chat_system", () => {
      const p = golden.prompts.find((q) => q.name === "chat_system")!;
      const bin = Deno.readFileSync(fixture(`golden/${name}.last_logits.bin`));
      const expected = new Float32Array(bin.buffer, bin.byteOffset, bin.byteLength / 4);
      const got = model.logits(p.tokens);
      assertEquals(got.length, expected.length);
      let worst = 0;
      for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - expected[i]));
      assert(worst <= tolerance, `logits differ by up to ${worst} > ${tolerance}`);
    });
  });
}

Deno.test("llama_ref tokenizes the corpus as the goldens' llama.cpp did", async () => {
  const corpus: { cases: TokenizerCase[] } = JSON.parse(
    Deno.readTextFileSync(fixture("golden/tokenizer.json")),
  );
  assertEquals(corpus.cases.length, 105);
  using vocab = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  for (const c of corpus.cases) {
    const special = vocab.tokenize(c.text, { special: true, addSpecial: true });
    assertEquals(special, c.llama_cpp.parse_special, `${c.name}, special tokens parsed`);
    const plain = vocab.tokenize(c.text, { special: false, addSpecial: true });
    assertEquals(plain, c.llama_cpp.no_parse_special, `${c.name}, special tokens as text`);
    assertEquals(
      vocab.detokenize(special) === c.text,
      c.llama_cpp.decode_roundtrip_parse_special,
      `${c.name}: detokenize round trip`,
    );
  }
});

Deno.test("llama_ref renders chat with llama.cpp's built-in template as the goldens did", async () => {
  using vocab = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  // The prompts without tools, template arguments or reasoning in the history, which
  // llama.cpp's built-in ChatML renders as Qwen3's Jinja template does.
  for (const name of ["chat_hello", "chat_system", "chat_multiturn", "chat_unicode"]) {
    const p = modelGolden("qwen3-tiny-f16").prompts.find((q) => q.name === name)!;
    const messages = p.messages!.map((m) => ({ role: String(m.role), content: String(m.content) }));
    assertEquals(vocab.chatTemplate(messages), p.text, name);
  }
  assertEquals(vocab.meta("general.architecture"), "qwen3");
  assertEquals(vocab.meta("no.such.key"), undefined);
  assertEquals(vocab.isEog(151645), true);
  assertEquals(vocab.isEog(9707), false);
});

/** The tied output matrix of the f16 fixture, one row per token. */
function outputRows(path: string): { rows: Float32Array; hidden: number } {
  const file = openGguf(path);
  try {
    const t = file.tensor("token_embd.weight")!;
    const n = t.ne[0] * t.ne[1];
    return { rows: dequantize(t.type, file.data(t), n), hidden: t.ne[0] };
  } finally {
    file.close();
  }
}

Deno.test("llama_ref embed: the final hidden state, pooled by llama.cpp", async () => {
  const path = fixture("qwen3-tiny-f16.gguf");
  using model = await openLlamaModel(path, { contextLength: 256 });
  const p = modelGolden("qwen3-tiny-f16").prompts.find((q) => q.name === "text_code")!;
  const hiddenState = model.embed(p.tokens, "none");
  assertEquals(hiddenState.length, model.nEmbd);
  // A generative model's own pooling is none: the same vector.
  assertEquals(model.embed(p.tokens), hiddenState);

  // The last hidden state times the tied output matrix gives llama.cpp's logits.
  const { rows, hidden } = outputRows(path);
  const logits = model.logits(p.tokens);
  for (const [id] of topLogits(logits, 20)) {
    let dot = 0;
    for (let i = 0; i < hidden; i++) dot += rows[id * hidden + i] * hiddenState[i];
    assert(Math.abs(dot - logits[id]) < 0.05, `token ${id}: ${dot} vs ${logits[id]}`);
  }

  // Attention is causal, so position i's state is the last state of the first i+1 tokens:
  // mean and last pooling follow from the per-prefix states.
  const prefixes = p.tokens.map((_, i) => model.embed(p.tokens.slice(0, i + 1), "none"));
  const mean = new Float32Array(model.nEmbd);
  for (const e of prefixes) e.forEach((v, i) => (mean[i] += v / prefixes.length));
  const pooledMean = model.embed(p.tokens, "mean");
  const pooledLast = model.embed(p.tokens, "last");
  for (let i = 0; i < model.nEmbd; i++) {
    assert(Math.abs(pooledMean[i] - mean[i]) < 1e-3, `mean pooling, dimension ${i}`);
    assert(Math.abs(pooledLast[i] - hiddenState[i]) < 1e-3, `last pooling, dimension ${i}`);
  }
});

Deno.test("llama_ref embedMany: batched as llama.cpp's embedding example, each as embed's", async () => {
  // Its own pooling (last token), as the embedding example pools.
  using model = await openLlamaModel(pooledFixture("qwen3-embed-tiny-f16"), { threads: 1 });
  const inputs = modelGolden("qwen3-tiny-f16").prompts.filter((p) => p.tokens.length < 60)
    .map((p) => p.tokens);
  // Two to four sequences per llama_decode, the last batch partial.
  const batched = model.embedMany(inputs, 3);
  assertEquals(batched.length, inputs.length);
  inputs.forEach((ids, k) => {
    const alone = model.embed(ids);
    for (let i = 0; i < model.nEmbd; i++) {
      assert(Math.abs(batched[k][i] - alone[i]) < 1e-3, `input ${k}, dimension ${i}`);
    }
  });
});

Deno.test("llama_ref refuses bad input with typed errors and stays usable", async () => {
  const model: LlamaModel = await openLlamaModel(fixture("qwen3-tiny-q8_0.gguf"), {
    contextLength: 64,
  });
  try {
    const ok = model.greedy([9707], 2).map((s) => s.id);
    await assertRefError(() => model.logits([model.nVocab]), "llama_ref_bad_input");
    await assertRefError(() => model.logits([-1]), "llama_ref_bad_input");
    await assertRefError(() => model.logits([1.5]), "llama_ref_bad_input");
    await assertRefError(() => model.logits([]), "llama_ref_bad_input");
    await assertRefError(() => model.greedy([9707], 65), "llama_ref_bad_input");
    await assertRefError(() => model.greedy([9707], 0), "llama_ref_bad_input");
    assertEquals(model.greedy([9707], 2).map((s) => s.id), ok, "same answer after refusals");
  } finally {
    model.close();
  }
  await assertRefError(() => model.logits([9707]), "llama_ref_closed");
  model.close();

  const notGguf = await Deno.makeTempFile({ suffix: ".gguf" });
  try {
    await Deno.writeTextFile(notGguf, "not a model");
    await assertRefError(() => openLlamaModel(notGguf), "llama_ref_load");
  } finally {
    await Deno.remove(notGguf);
  }
  await assertRefError(() => openLlamaModel(notGguf, { contextLength: 0 }), "llama_ref_bad_input");
  using vocab = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
  await assertRefError(() => vocab.logits([9707]), "llama_ref_unsupported");
});

Deno.test("llama_ref checks the params struct layout against llama.h's defaults", () => {
  const params = new Uint8Array(160);
  const view = new DataView(params.buffer);
  const defaults: Array<[number, number]> = [[0, 512], [4, 2048], [8, 512], [12, 1], [24, 1]];
  for (const [offset, value] of defaults) view.setUint32(offset, value, true);
  view.setInt32(28, 4, true);
  view.setInt32(32, 4, true);
  view.setInt32(44, -1, true);
  view.setInt32(52, -1, true);
  view.setFloat32(64, -1, true);
  view.setFloat32(84, -1, true);
  view.setInt32(104, 1, true);
  view.setInt32(108, 1, true);
  for (const b of [129, 130, 132]) params[b] = 1;
  checkedContextDefaults(params);
  // One field off by four bytes (as a struct from another release would be) is caught.
  view.setUint32(CONTEXT.n_threads, 0, true);
  view.setUint32(CONTEXT.n_threads + 4, 4, true);
  assertRefErrorSync(() => checkedContextDefaults(params), "llama_ref_abi");
  assertRefErrorSync(() => checkedContextDefaults(new Uint8Array(152)), "llama_ref_abi");
});

function assertRefErrorSync(fn: () => unknown, code: string): void {
  try {
    fn();
  } catch (err) {
    assert(err instanceof LlamaRefError, `expected LlamaRefError, got ${err}`);
    assertEquals(err.code, code, err.message);
    return;
  }
  throw new Error(`expected LlamaRefError ${code}, nothing was thrown`);
}
