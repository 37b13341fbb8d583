/**
 * Llama 3, Mistral, Qwen2.5 and Gemma 3 split over two CPU processes: every family prompt's
 * 32 greedy tokens are one rank's, and every step's logits stay within the fixture's
 * tolerance of one rank's (partial sums round a little differently). Each family splits its
 * own way: Qwen2's biases go with their heads, Gemma 3's per-head and post norms stay whole
 * on every rank, Llama's rope_freqs too.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { FAMILIES, type Family, familyFixture, type FixtureQuant } from "../fixtures.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import type { Step } from "../../src/backend/backend.ts";
import { argmax } from "../../src/common/argmax.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { LocalRunner, type ModelRunner, openModel } from "../../src/runner/mod.ts";
import { TpRunner } from "../../src/tp/tp_runner.ts";
import { FAMILY_TOLERANCE, familyPrompts, promptText } from "../models/family_prompts.ts";
import { workersOn } from "./support/children.ts";
import { withLogs } from "./support/logs.ts";

/** The CUDA device label of this file's workers (see support/children.ts). */
const LABEL = 13;
const KV = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };
const TABLE = Int32Array.from({ length: KV.nBlocks }, (_, i) => i);
const STEPS = 32;

function batch(ids: readonly number[], start: number): Step {
  return {
    ids: Int32Array.from(ids),
    layout: {
      positions: Int32Array.from(ids, (_, i) => start + i),
      sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: TABLE }],
    },
    logitRows: Int32Array.of(ids.length - 1),
  };
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

/** The prompts of `family` as llama.cpp tokenizes them. */
async function promptIds(family: Family, path: string): Promise<Array<[string, number[]]>> {
  using ref = await openLlamaModel(path, { vocabOnly: true });
  const file = openGguf(path);
  try {
    return familyPrompts(family).map((p) => {
      const { text, addSpecial } = promptText(file, p);
      return [p.name, ref.tokenize(text, { special: true, addSpecial })];
    });
  } finally {
    file.close();
  }
}

function checkPrompt(tp: ModelRunner, one: ModelRunner, name: string, ids: number[], tol: number) {
  let logits = { tp: tp.forward(batch(ids, 0)), one: one.forward(batch(ids, 0)) };
  const greedy: number[] = [];
  for (let k = 0; k < STEPS; k++) {
    const d = maxDiff(logits.tp, logits.one);
    assert(d <= tol, `${name}: step ${k}: two ranks and one differ by ${d}`);
    assertEquals(argmax(logits.tp), argmax(logits.one), `${name}: step ${k}`);
    greedy.push(argmax(logits.tp));
    const b = batch([greedy[k]], ids.length + k);
    logits = { tp: tp.forward(b), one: one.forward(b) };
  }
}

for (const family of FAMILIES) {
  for (const quant of ["f16", "q8_0"] as FixtureQuant[]) {
    Deno.test(`tp runner: ${family}-tiny-${quant} on two ranks equals one rank`, async () => {
      const path = await familyFixture(family, quant);
      const prompts = await promptIds(family, path);
      withLogs(() => {
        const model = openModel(path);
        const tp = TpRunner.open(
          model,
          { device: "cpu", threads: 1, tensorParallel: 2, devices: [0, LABEL] },
          KV,
        );
        const one = LocalRunner.open(model, { device: "cpu", threads: 1 }, KV);
        try {
          for (const [name, ids] of prompts) {
            checkPrompt(tp, one, name, ids, FAMILY_TOLERANCE[quant]);
          }
          assertEquals(tp.failure, null);
        } finally {
          tp.close();
          one.close();
          model.file.close();
        }
        assertEquals(workersOn(LABEL), [], "the worker is reaped on close");
      });
    });
  }
}
