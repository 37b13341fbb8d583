/**
 * YaRN asked for at load, split over two CPU processes: the worker applies the load's rope
 * scaling to its own copy of the file, so two ranks equal one rank on a Qwen3 file that
 * does not carry YaRN (a worker rotating its heads without it lands far off: the magnitude
 * alone moves the logits by ~0.8 at these positions).
 */

import { assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { openModel } from "../../src/runner/mod.ts";
import { assertTwoRanksEqualOne } from "./support/rank_parity.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 19;
const KV = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };
const YARN = { type: "yarn" as const, factor: 4, originalContextLength: 32768 };

Deno.test("tp runner: YaRN asked for at load, two ranks equal one rank", () => {
  const model = openModel(fixture("qwen3-tiny-f16.gguf"), YARN);
  try {
    assertEquals(model.shape.contextLength, 131072);
    assertTwoRanksEqualOne(model, LABEL, KV, { ropeScaling: YARN });
  } finally {
    model.file.close();
  }
});
