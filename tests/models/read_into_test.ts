/**
 * Backend.read into a caller's array (what the engine does every step): the same logits as
 * a read into a new array, written to the front of the caller's array and handed back as
 * its subarray, the rest left alone; an array too short is refused. CPU and reference.
 */

import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { ReferenceBackend } from "../../src/backend/reference/reference_backend.ts";
import type { Backend, Step } from "../../src/backend/backend.ts";

/** A 5-token prompt from position 0 with every row's logits: the same step every time. */
const STEP: Step = {
  ids: Int32Array.of(9707, 11, 1879, 13, 358),
  layout: {
    positions: Int32Array.of(0, 1, 2, 3, 4),
    sequences: [{ rowStart: 0, rowCount: 5, blockTable: Int32Array.of(0, 1) }],
  },
  logitRows: Int32Array.of(0, 1, 2, 3, 4),
};

for (
  const [name, make] of [
    ["cpu", () => new CpuBackend({ threads: 2 })],
    ["reference", () => new ReferenceBackend()],
  ] as const
) {
  Deno.test(`read into a kept array (${name}): same logits, the caller's memory`, () => {
    const file = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
    const backend: Backend = make();
    const kv = { blockSize: 4, nBlocks: 4, dtype: "f16" as const };
    const model = readModel(file);
    const instance = ModelInstance.create(model, backend, kv);
    try {
      const fresh = instance.forward(STEP)!;
      const n = fresh.length;
      assertEquals(n, 5 * model.shape.vocabSize);
      const into = new Float32Array(new ArrayBuffer(4 * (n + 7))).fill(-1);
      const got = instance.forward(STEP, undefined, into)!;
      assert(got.buffer === into.buffer && got.byteOffset === 0);
      assertEquals(got, fresh);
      assertEquals(into.subarray(n), new Float32Array(7).fill(-1));
      const short = () => instance.forward(STEP, undefined, new Float32Array(n - 1));
      assertMatch(assertThrows(short, RangeError).message, /do not fit/);
    } finally {
      instance.close();
      backend.close();
      file.close();
    }
  });
}
