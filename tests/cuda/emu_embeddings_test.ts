/**
 * Embeddings on the emulated GPU (the PTX kernels and cuBLAS prefill, run by the CPU
 * emulator) against llama.cpp: every input's pooled final hidden state, one per request
 * and all batched in one, cosine ≥ 0.9999 for F16 and ≥ 0.999 for Q8_0; a mean-pooled
 * variant over steps of 32 tokens. On a real GPU `deno task test:gpu` runs the same
 * model code.
 */

import { assert } from "../support/assert.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { writeVariant } from "../support/gguf_variant.ts";
import { emulator, resetEmulator } from "./support.ts";
import { type PooledFixture, pooledFixture } from "../fixtures/pooled/mod.ts";
import { cosine, openSession, pool, type SessionOptions, TEXTS } from "../embeddings/support.ts";
import { Kv } from "../../src/gguf/mod.ts";

const emu = await emulator();

async function check(path: string, floor: number, opts: SessionOptions = {}): Promise<void> {
  using ref = await openLlamaModel(path);
  const expected = TEXTS.map((t) =>
    ref.embed(ref.tokenize(t, { special: true, addSpecial: true }))
  );
  resetEmulator(emu!);
  const session = openSession(path, {
    ...opts,
    device: "cuda",
    cuda: { libcuda: emu!.lib, libcublas: emu!.lib },
  });
  try {
    for (const i of [0, 3, 6]) {
      const { vectors } = await pool(session, [{ kind: "text", text: TEXTS[i] }]);
      const c = cosine(vectors[0], expected[i]);
      assert(c >= floor, `input ${i} alone: cosine ${c} < ${floor}`);
    }
    const { vectors } = await pool(session, TEXTS.map((text) => ({ kind: "text", text })));
    vectors.forEach((v, i) => {
      const c = cosine(v, expected[i]);
      assert(c >= floor, `input ${i} batched: cosine ${c} < ${floor}`);
    });
  } finally {
    session.close();
  }
}

const CASES: Array<[PooledFixture, number]> = [
  ["qwen3-embed-tiny-f16", 0.9999],
  ["qwen3-embed-tiny-q8_0", 0.999],
];

for (const [name, floor] of CASES) {
  Deno.test({
    name: `emulated CUDA: ${name} embeddings equal llama.cpp's, alone and batched`,
    ignore: emu === null,
    fn: () => check(pooledFixture(name), floor),
  });
}

Deno.test({
  name: "emulated CUDA: mean pooling over steps of 32 tokens equals llama.cpp's",
  ignore: emu === null,
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const path = writeVariant(
        pooledFixture("qwen3-embed-tiny-f16"),
        `${dir}/mean.gguf`,
        (kv) => kv.set("qwen3.pooling_type", Kv.u32(1)),
      );
      await check(path, 0.9999, { maxBatchTokens: 32 });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
