/**
 * The qwen3moe forward pass against llama.cpp live, on every qwen3moe fixture and on the
 * native CPU backend and the reference: the argmax at every prompt position (the prompt in
 * one batch, so many tokens share experts), the last position's top 20 logits within the
 * fixture's tolerance, and 32 greedy steps decoded one token at a time, identical, each
 * step's top 5 within the tolerance. The fixtures route decisively (moe_weights.ts) and a
 * wrong expert, a missing renormalisation or a missing MoE moves the top logits by 1 to 7,
 * far above the tolerances; the test also checks the fixture still gives llama.cpp wide
 * greedy margins, so that it keeps telling right from wrong.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { readModel } from "../../src/models/registry.ts";
import { ModelInstance } from "../../src/models/instance.ts";
import { CpuBackend } from "../../src/backend/cpu/cpu_backend.ts";
import { ReferenceBackend } from "../../src/backend/reference/reference_backend.ts";
import type { Backend } from "../../src/backend/backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { type LiveGolden, liveGoldens } from "../fixtures/moe/live_golden.ts";
import { MOE_FIXTURES, type MoeFixture, moeFixture } from "../fixtures/moe/qwen3moe_tiny.ts";

/** Max abs difference of top logits (llama.cpp quantizes activations, neuron's reference does not). */
export const MOE_TOLERANCE: Record<MoeFixture, number> = {
  "qwen3moe-tiny-f16": 0.05,
  "qwen3moe-tiny-q8_0": 0.4,
  "qwen3moe-tiny-q4_k_m": 0.4,
};

const BLOCK = 16;
const MAX_TOKENS = 256;
const TABLE = Int32Array.from({ length: MAX_TOKENS / BLOCK }, (_, i) => i);

function run(m: ModelInstance, ids: number[], start: number, logitRows: number[]): Float32Array {
  return m.forward({
    ids: Int32Array.from(ids),
    layout: {
      positions: Int32Array.from(ids, (_, i) => start + i),
      sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: TABLE }],
    },
    logitRows: Int32Array.from(logitRows),
  })!;
}

function topDiff(logits: Float32Array, expected: Array<[number, number]>): number {
  return Math.max(...expected.map(([id, l]) => Math.abs(logits[id] - l)));
}

function check(m: ModelInstance, g: LiveGolden, tol: number, vocab: number, what: string): void {
  const rows = g.tokens.map((_, i) => i);
  const all = run(m, g.tokens, 0, rows);
  const argmaxes = rows.map((r) => argmax(all.subarray(r * vocab, (r + 1) * vocab)));
  assertEquals(argmaxes, g.argmaxPerPosition, `${what} ${g.name}: argmax per position`);
  const last = all.subarray((g.tokens.length - 1) * vocab);
  const d = topDiff(last, g.lastTop20);
  assert(d <= tol, `${what} ${g.name}: top-20 logits differ by ${d} > ${tol}`);
  const greedy = [argmax(last)];
  for (let k = 1; k < g.greedy.length; k++) {
    const logits = run(m, [greedy[k - 1]], g.tokens.length + k - 1, [0]);
    greedy.push(argmax(logits));
    const s = topDiff(logits, g.greedy[k].top5);
    assert(s <= tol, `${what} ${g.name}: greedy step ${k} top-5 logits differ by ${s}`);
  }
  assertEquals(greedy, g.greedy.map((s) => s.id), `${what} ${g.name}: greedy continuation`);
}

function withInstance(
  path: string,
  backend: Backend,
  fn: (m: ModelInstance, vocab: number) => void,
) {
  const file = openGguf(path);
  const model = readModel(file);
  const kv = { blockSize: BLOCK, nBlocks: MAX_TOKENS / BLOCK, dtype: "f16" as const };
  const m = ModelInstance.create(model, backend, kv);
  try {
    fn(m, model.shape.vocabSize);
  } finally {
    m.close();
    backend.close();
    file.close();
  }
}

for (const name of MOE_FIXTURES) {
  Deno.test(`${name}: CPU and reference match llama.cpp (argmax per position, top-20, 32 greedy steps)`, async () => {
    const path = moeFixture(name);
    const goldens = await liveGoldens(path);
    for (const g of goldens) {
      const margin = Math.min(...g.greedy.map((s) => s.margin));
      assert(margin >= 5, `${name} ${g.name}: the fixture's greedy margin fell to ${margin}`);
    }
    for (const mmap of [true, false]) {
      withInstance(path, new CpuBackend({ threads: 2, mmap }), (m, vocab) => {
        for (const g of goldens) check(m, g, MOE_TOLERANCE[name], vocab, `cpu mmap=${mmap}`);
      });
    }
    withInstance(path, new ReferenceBackend(), (m, vocab) => {
      check(m, goldens[0], MOE_TOLERANCE[name], vocab, "reference");
    });
  });
}
