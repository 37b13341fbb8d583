/**
 * Step replay (CpuBackend.runStep, cpu/step_template.ts): decode steps replayed from
 * the template of an earlier step of the same shape give bit-identical logits to the same
 * steps recorded op by op, for one sequence and for two sequences sharing steps, and a
 * step of a new shape (another table length, another batch) is recorded, not replayed. A
 * replayed step's integers get the checks recording gives them.
 */

import { assertEquals, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { CpuKernelError } from "../../src/backend/cpu/errors.ts";
import type { Step, StepLayout } from "../../src/backend/backend.ts";

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
  const queue = backend.pool.queue;
  const own = queue.replayStep.bind(queue);
  queue.replayStep = (key: string, step: Step): boolean => {
    const done = replay && own(key, step);
    if (done) replayed++;
    return done;
  };
  const kv = { blockSize: BLOCK, nBlocks: 32, dtype: "f16" as const };
  const instance = ModelInstance.create(readModel(file), backend, kv);
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
    const logitRows = Int32Array.from(seqs.map(([, start, count]) => start + count - 1));
    logits.push(instance.forward({ ids: Int32Array.from(ids), layout, logitRows })!);
  };
  try {
    step([1, 2, 3, 4, 5], [0, 1, 2, 3, 4], [[0, 0, 5]]);
    step([6, 7, 8], [0, 1, 2], [[1, 0, 3]]);
    for (let t = 0; t < 8; t++) step([10 + t, 20 + t], [5 + t, 3 + t], [[0, 0, 1], [1, 1, 1]]);
    for (let t = 0; t < 6; t++) step([30 + t], [13 + t], [[0, 0, 1]]);
  } finally {
    instance.close();
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
  const kv = { blockSize: BLOCK, nBlocks: 8, dtype: "f16" as const };
  const instance = ModelInstance.create(readModel(file), backend, kv);
  const step = (table: number[]) => {
    const layout: StepLayout = {
      positions: Int32Array.of(1),
      sequences: [{ rowStart: 0, rowCount: 1, blockTable: Int32Array.from(table) }],
    };
    instance.forward({ ids: Int32Array.of(5), layout, logitRows: Int32Array.of(0) });
  };
  try {
    step([0]);
    step([3]);
    assertThrows(() => step([8]), CpuKernelError);
    // Rejected before it ran, and the list is left usable.
    step([2]);
  } finally {
    instance.close();
    backend.close();
    file.close();
  }
});

Deno.test("step replay: two models on one backend never replay each other's steps", () => {
  // Same shapes, one backend: a template recorded for one cache must not serve the other.
  const names = ["qwen3-tiny-q8_0.gguf", "qwen3-tiny-f16.gguf"];
  const kv = { blockSize: BLOCK, nBlocks: 8, dtype: "f16" as const };
  const decodeOn = (instances: ModelInstance[]): Float32Array[][] => {
    const out: Float32Array[][] = instances.map(() => []);
    for (let t = 0; t < 6; t++) {
      instances.forEach((instance, m) => {
        const layout: StepLayout = {
          positions: Int32Array.of(t),
          sequences: [{ rowStart: 0, rowCount: 1, blockTable: Int32Array.of(0, 1) }],
        };
        out[m].push(
          instance.forward({ ids: Int32Array.of(100 + t), layout, logitRows: Int32Array.of(0) })!,
        );
      });
    }
    return out;
  };
  const files = names.map((n) => openGguf(fixture(n)));
  try {
    const alone = files.map((file) => {
      const backend = new CpuBackend({ threads: 1 });
      const instance = ModelInstance.create(readModel(file), backend, kv);
      try {
        return decodeOn([instance])[0];
      } finally {
        instance.close();
        backend.close();
      }
    });
    const shared = new CpuBackend({ threads: 1 });
    const both = files.map((file) => ModelInstance.create(readModel(file), shared, kv));
    try {
      const together = decodeOn(both);
      together.forEach((steps, m) => assertEquals(steps, alone[m], names[m]));
    } finally {
      both.forEach((i) => i.close());
      shared.close();
    }
  } finally {
    files.forEach((f) => f.close());
  }
});
