/**
 * The engine reads every step's output rows into one kept array (engine/step_rows.ts)
 * instead of a new one per step: sampled decoding hands the runner the same array at every
 * step and draws exactly the tokens it draws from fresh arrays (logprobs included, and a
 * speculative verification's rows), and a step too large to keep reads into a new array.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { Engine, GREEDY, StepRows } from "../../src/engine/mod.ts";
import { MAX_KEPT_BYTES } from "../../src/engine/step_rows.ts";
import { type ModelRunner, openModel, openRunner } from "../../src/runner/mod.ts";
import { FORCED, ids, request, submit } from "./spec_support.ts";

/** `runner`, recording the array each forward reads into (or dropping it: fresh arrays). */
function recording(r: ModelRunner, keep: boolean, seen: (Float32Array | undefined)[]): ModelRunner {
  return {
    shape: r.shape,
    device: r.device,
    kvBytes: r.kvBytes,
    forward: ((step, interrupt, into) => {
      seen.push(into);
      return r.forward(step, interrupt, keep ? into : undefined);
    }) as ModelRunner["forward"],
    forwardArgmax: (step, interrupt, masks) => r.forwardArgmax(step, interrupt, masks),
    deviceBytes: () => r.deviceBytes(),
    close: () => r.close(),
  };
}

function sampled(keep: boolean): { tokens: number[]; logprobs: number[]; seen: unknown[] } {
  const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
  const kv = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };
  const local = openRunner(model, { device: "cpu", threads: 1 }, kv);
  const seen: (Float32Array | undefined)[] = [];
  const engine = new Engine(recording(local, keep, seen), {
    contextLength: 512,
    maxSequences: 4,
    maxBatchTokens: 64,
    kv,
  });
  try {
    const prompt = Array.from({ length: 20 }, (_, i) => 1000 + ((i * 7) % 11));
    const over = {
      sampling: { ...GREEDY, temperature: 0.9, seed: 11, logprobs: true, topLogprobs: 3 },
    };
    const plain = submit(engine, request("a", prompt, 12, { mode: "off", k: 0, n: 5 }, over));
    const spec = submit(engine, request("b", prompt, 12, FORCED, over));
    while (engine.hasWork) engine.step();
    const out = [...plain.tokens, ...spec.tokens];
    return {
      tokens: [...ids(plain), -1, ...ids(spec)],
      logprobs: out.map((t) => t.logprob ?? NaN),
      seen,
    };
  } finally {
    engine.cancelAll();
    local.close();
    model.file.close();
  }
}

Deno.test("engine: sampled steps read into one kept array and draw what fresh arrays give", () => {
  const kept = sampled(true);
  const fresh = sampled(false);
  assertEquals(kept.tokens.length, 25);
  assertEquals(kept.tokens, fresh.tokens);
  assertEquals(kept.logprobs, fresh.logprobs);
  assert(kept.seen.length >= 12, `${kept.seen.length} forwards`);
  // The array grows for the largest step's rows (the verifications'), then serves every
  // later step.
  const last = kept.seen.at(-1);
  assert(last instanceof Float32Array);
  assert(kept.seen.filter((a) => a !== last).length <= 2, "a new array after the largest step");
  assert(kept.seen.slice(-8).every((a) => a === last));
});

Deno.test("StepRows: one array for every size up to the largest, none past the cap", () => {
  const rows = new StepRows();
  const a = rows.target(1000)!;
  assertEquals(a.length, 1000);
  assert(rows.target(10) === a);
  const b = rows.target(5000)!;
  assertEquals(b.length, 5000);
  assert(rows.target(1000) === b);
  assertEquals(rows.target(MAX_KEPT_BYTES / 4 + 1), undefined);
  assert(rows.target(MAX_KEPT_BYTES / 4) !== undefined);
});
