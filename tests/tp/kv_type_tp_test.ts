/**
 * A quantized KV cache split over two CPU processes: each rank keeps its share of the KV
 * heads as q8_0 blocks (a head is whole blocks, so the split cuts no block), and two ranks
 * equal one rank with the same cache type; with heads of 64 the ranks also rotate their
 * heads (kvRotation), each its own.
 */

import { fixture } from "../fixtures.ts";
import { openModel } from "../../src/runner/mod.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import { HEADS_128_SHAPE } from "../gpu/checks/model.ts";
import { assertTwoRanksEqualOne } from "./support/rank_parity.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 23;

Deno.test("tp runner: a q8_0 KV cache over two ranks equals one rank's", () => {
  const model = openModel(fixture("qwen3-tiny-f16.gguf"));
  try {
    assertTwoRanksEqualOne(model, LABEL, { blockSize: 16, nBlocks: 64, dtype: "q8_0" });
  } finally {
    model.file.close();
  }
});

Deno.test("tp runner: a q4_0 KV cache of rotated heads (head_dim 128) over two ranks equals one rank's", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/heads128-q8_0.gguf`;
  writeSyntheticQwen3(path, {
    // The golden prompt's ids are the Qwen vocabulary's.
    shape: { ...HEADS_128_SHAPE, vocab: 151936, tiedOutput: true },
    quant: "q8_0",
    seed: 3,
  });
  const model = openModel(path);
  try {
    assertTwoRanksEqualOne(model, LABEL, { blockSize: 16, nBlocks: 64, dtype: "q4_0" });
  } finally {
    model.file.close();
    await Deno.remove(dir, { recursive: true });
  }
});
