/**
 * A model fixture's goldens on a device backend: every prompt position's argmax (prompt
 * evaluated in batches, argmax taken on the device), the last position's top-20 logits
 * within the fixture's tolerance, and the greedy continuation one token per step (argmax
 * on the device, top-5 logits of each step within tolerance). Repeated decode steps of one
 * shape exercise graph capture and replay.
 */

import type { Activation, Backend, KvCache, StepLayout } from "../../../src/backend/backend.ts";
import { openGguf } from "../../../src/gguf/mod.ts";
import type { Model } from "../../../src/models/family.ts";
import { readModel } from "../../../src/models/registry.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import {
  fixture,
  type GoldenPrompt,
  LOGIT_TOLERANCE,
  type ModelFixture,
  modelGolden,
} from "../../fixtures.ts";

const BLOCK = 16;
const MAX_TOKENS = 1024;
const CHUNK = 128;

export interface DeviceBackend extends Backend {
  argmaxRows(a: Activation): Int32Array;
}

export interface GoldenOptions {
  /** Prompt names to check (default all). */
  prompts?: string[];
  /** Greedy steps to check (default all 32). */
  greedySteps?: number;
  kvDtype?: "f16" | "f32";
}

export interface GoldenReport {
  prompts: number;
  /** Largest top-20 / top-5 logit difference seen. */
  worstLogitDiff: number;
  tolerance: number;
}

function topDiff(logits: Float32Array, expected: Array<[number, number]>): number {
  return Math.max(...expected.map(([id, l]) => Math.abs(logits[id] - l)));
}

class Session {
  readonly cache: KvCache;
  readonly table = Int32Array.from(
    { length: MAX_TOKENS / BLOCK },
    (_, i) => (i * 7) % (MAX_TOKENS / BLOCK),
  );

  constructor(readonly model: Model, readonly backend: DeviceBackend, dtype: "f16" | "f32") {
    this.cache = backend.createKvCache({
      ...model.kvShape,
      blockSize: BLOCK,
      nBlocks: MAX_TOKENS / BLOCK,
      dtype,
    });
  }

  forward(ids: ArrayLike<number>, start: number, logitRows: number[]): Activation {
    const layout: StepLayout = {
      positions: Int32Array.from({ length: ids.length }, (_, i) => start + i),
      sequences: [{ rowStart: 0, rowCount: ids.length, blockTable: this.table }],
    };
    const step = { ids: Int32Array.from(ids), layout, logitRows: Int32Array.from(logitRows) };
    return this.model.forward(step, this.cache);
  }
}

function checkPrompt(s: Session, p: GoldenPrompt, tolerance: number, steps: number): number {
  const be = s.backend;
  const argmaxes: number[] = [];
  let last: Float32Array = new Float32Array(0);
  for (let start = 0; start < p.tokens.length; start += CHUNK) {
    const chunk = p.tokens.slice(start, start + CHUNK);
    // The last row first: its logits are then the view of row 0.
    const rows = [chunk.length - 1, ...chunk.map((_, i) => i).slice(0, -1)];
    const logits = s.forward(chunk, start, rows);
    const am = be.argmaxRows(logits);
    argmaxes.push(...Array.from(am.subarray(1)), am[0]);
    last = be.read(be.rowsOf(logits, 1));
  }
  assertEquals(argmaxes, p.argmax_per_position, `${p.name}: argmax per position`);
  let worst = topDiff(last, p.last_topk);
  assert(worst <= tolerance, `${p.name}: top-20 logits differ by ${worst} > ${tolerance}`);

  let next = p.argmax_per_position[p.tokens.length - 1];
  const greedy = [next];
  for (let k = 1; k < steps; k++) {
    const logits = s.forward([next], p.tokens.length + k - 1, [0]);
    next = be.argmaxRows(logits)[0];
    greedy.push(next);
    const d = topDiff(be.read(logits), p.greedy[k].top5);
    worst = Math.max(worst, d);
    assert(
      d <= tolerance,
      `${p.name}: greedy step ${k} top-5 logits differ by ${d} > ${tolerance}`,
    );
  }
  assertEquals(greedy, p.greedy.slice(0, steps).map((g) => g.id), `${p.name}: greedy continuation`);
  return worst;
}

/** Checks the goldens of `name` on `backend` (which stays open; the model is closed). */
export function checkGolden(
  backend: DeviceBackend,
  name: ModelFixture,
  options: GoldenOptions = {},
): GoldenReport {
  const golden = modelGolden(name);
  const prompts = golden.prompts.filter((p) =>
    !options.prompts || options.prompts.includes(p.name)
  );
  const file = openGguf(fixture(`${name}.gguf`));
  const model = readModel(file).load(backend);
  const tolerance = LOGIT_TOLERANCE[name];
  let worst = 0;
  try {
    const session = new Session(model, backend, options.kvDtype ?? "f16");
    for (const p of prompts) {
      worst = Math.max(
        worst,
        checkPrompt(session, p, tolerance, options.greedySteps ?? p.greedy.length),
      );
    }
  } finally {
    model.close();
    file.close();
  }
  return { prompts: prompts.length, worstLogitDiff: worst, tolerance };
}
