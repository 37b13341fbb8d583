/**
 * A quantized KV cache split over two CPU processes: each rank keeps its share of the KV
 * heads as q8_0 blocks (a head is whole blocks, so the split cuts no block), and two ranks
 * equal one rank with the same cache type.
 */

import { fixture } from "../fixtures.ts";
import { openModel } from "../../src/runner/mod.ts";
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
