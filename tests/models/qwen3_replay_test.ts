/**
 * Step replay (backend.ts replayStep, cpu/step_template.ts): decode steps replayed from
 * the template of an earlier step of the same shape give bit-identical logits to the same
 * steps recorded op by op, for one sequence and for two sequences sharing steps, and a
 * step of a new shape (another table length, another batch) is recorded, not replayed. A
 * replayed step's integers get the checks recording gives them.
 */

import { assertEquals, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { Qwen3Model } from "../../src/models/qwen3.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { CpuKernelError } from "../../src/backend/cpu/errors.ts";
import type { KvCache, StepInputs, StepLayout } from "../../src/backend/backend.ts";

const BLOCK = 4;

interface Run {
  logits: Float32Array[];
  replayed: number;
}

/** Prefills two sequences, then decodes them together and alone; every step's logits. */
function decode(replay: boolean): Run {
  const file = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
  const backend = new CpuBackend({ threads: 2 });
  let replayed = 0;
  const own = backend.replayStep.bind(backend);
  backend.replayStep = (key: string, inputs: StepInputs): boolean => {
    const done = replay && own(key, inputs);
    if (done) replayed++;
    return done;
  };
  const model = Qwen3Model.load(file, backend);
  const hp = model.hparams;
  const cache: KvCache = backend.createKvCache({
    nLayers: hp.nLayers,
    nKvHeads: hp.nKvHeads,
    headDim: hp.headDim,
    blockSize: BLOCK,
    nBlocks: 32,
    dtype: "f16",
  });
  const tables = [new Int32Array([0, 1, 2, 3, 4, 5]), new Int32Array([8, 9, 10, 11, 12, 13])];
  const logits: Float32Array[] = [];
  const step = (ids: number[], positions: number[], seqs: number[][]) => {
    // Each sequence's table holds the blocks its positions reach so far.
    const layout: StepLayout = {
      positions: Int32Array.from(positions),
      sequences: seqs.map(([seq, rowStart, rowCount]) => ({
        rowStart,
        rowCount,
        blockTable: tables[seq].subarray(
          0,
          Math.floor(Math.max(...positions.slice(rowStart, rowStart + rowCount)) / BLOCK) + 1,
        ),
      })),
    };
    const rows = Int32Array.from(seqs.map(([, start, count]) => start + count - 1));
    logits.push(backend.read(model.forward(Int32Array.from(ids), layout, cache, rows)));
  };
  try {
    step([1, 2, 3, 4, 5], [0, 1, 2, 3, 4], [[0, 0, 5]]);
    step([6, 7, 8], [0, 1, 2], [[1, 0, 3]]);
    for (let t = 0; t < 8; t++) step([10 + t, 20 + t], [5 + t, 3 + t], [[0, 0, 1], [1, 1, 1]]);
    for (let t = 0; t < 6; t++) step([30 + t], [13 + t], [[0, 0, 1]]);
  } finally {
    model.close();
    backend.close();
    file.close();
  }
  return { logits, replayed };
}

Deno.test("step replay: replayed decode steps equal recorded ones bit for bit", () => {
  const recorded = decode(false);
  const replayed = decode(true);
  assertEquals(recorded.replayed, 0);
  // A step replays when an earlier one had its shape (rows, table lengths): 7 of the 16.
  assertEquals(replayed.replayed, 7);
  assertEquals(replayed.logits.length, recorded.logits.length);
  replayed.logits.forEach((l, i) => assertEquals(l, recorded.logits[i], `step ${i}`));
});

Deno.test("step replay: a replayed step's block ids are checked as a recorded one's are", () => {
  const file = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
  const backend = new CpuBackend({ threads: 1 });
  const model = Qwen3Model.load(file, backend);
  const hp = model.hparams;
  const cache = backend.createKvCache({
    nLayers: hp.nLayers,
    nKvHeads: hp.nKvHeads,
    headDim: hp.headDim,
    blockSize: BLOCK,
    nBlocks: 8,
    dtype: "f16",
  });
  const step = (table: number[]) => {
    const layout: StepLayout = {
      positions: Int32Array.of(1),
      sequences: [{ rowStart: 0, rowCount: 1, blockTable: Int32Array.from(table) }],
    };
    backend.read(model.forward(Int32Array.of(5), layout, cache, Int32Array.of(0)));
  };
  try {
    step([0]);
    step([3]);
    assertThrows(() => step([8]), CpuKernelError);
    // Rejected before it ran, and the list is left usable.
    step([2]);
  } finally {
    model.close();
    backend.close();
    file.close();
  }
});
