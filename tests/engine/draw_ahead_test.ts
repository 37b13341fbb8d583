/**
 * A step's sampled draws made together over the runner's threads (draw_ahead.ts,
 * runner.drawRows): every token and log-prob is the one drawing row by row gives, seeds
 * included, and rows the batch cannot take (penalties, greedy) keep their own way.
 */

import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { LOGIT_ROWS, packDraws } from "../support/logit_rows.ts";
import { CpuKernels } from "../../src/backend/cpu/kernels.ts";
import { CpuKernelError } from "../../src/backend/cpu/errors.ts";
import { EXP_TABLE } from "../../src/engine/exp_table.ts";
import { nativeSampling } from "../../src/engine/native_sampling.ts";
import type { DrawParams } from "../../src/engine/truncation.ts";
import { Rng } from "../../src/gguf/mod.ts";
import { Engine, type EngineRequest, GREEDY, type SampledToken } from "../../src/engine/mod.ts";
import { type ModelRunner, openModel, openRunner } from "../../src/runner/mod.ts";
import { HostDraws } from "../../src/runner/host_draws.ts";

// The tiny model's random weights make its logits steep: only temperatures this high
// leave its next token to the draw's u.
const SAMPLINGS: Array<Partial<EngineRequest["sampling"]>> = [
  { temperature: 20 },
  { temperature: 25, topP: 0.9 },
  { temperature: 20, topK: 20 },
  { temperature: 30, minP: 0.05 },
  { temperature: 20, logprobs: true, topLogprobs: 3 },
  // Not plain: the penalty changes its logits first, so it draws on its own.
  { temperature: 20, presencePenalty: 0.5 },
  {},
  { temperature: 30, topP: 0.95, topK: 40 },
];

/** Every choice's tokens, with their log-probs where asked, and how many rows `drawRows`
 * took in all (absent: the runner's drawRows hidden, so every row is drawn alone). */
function generateBatch(
  withDraws: boolean,
  seed = 1,
): { tokens: SampledToken[][]; drawn: number } {
  const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
  const kv = { blockSize: 16, nBlocks: 256, dtype: "f16" as const };
  const local = openRunner(model, { device: "cpu", threads: 2 }, kv);
  let drawn = 0;
  const runner: ModelRunner = {
    shape: local.shape,
    device: local.device,
    kvBytes: local.kvBytes,
    forward: ((s, i, into) => local.forward(s, i, into)) as ModelRunner["forward"],
    forwardArgmax: (s, i, m) => local.forwardArgmax(s, i, m),
    drawRows: withDraws
      ? (rows, width, which, params, table) => {
        drawn += which.length;
        return local.drawRows!(rows, width, which, params, table);
      }
      : undefined,
    deviceBytes: () => 0,
    close: () => {},
  };
  const engine = new Engine(runner, {
    contextLength: 512,
    maxSequences: 8,
    maxBatchTokens: 256,
    kv,
  });
  const tokens = SAMPLINGS.map(() => [] as SampledToken[]);
  try {
    SAMPLINGS.forEach((sampling, i) => {
      const prompt = Array.from({ length: 5 + i }, (_, j) => 1000 + 37 * i + 11 * j);
      engine.submit(
        {
          id: `r${i}`,
          prompt,
          maxTokens: 24,
          sampling: { ...GREEDY, seed: seed + i, ...sampling },
          stopTokenIds: [],
        },
        { token: (t) => (tokens[i].push(t), false), finished: () => {}, failed: (c) => fail(c) },
      );
    });
    while (engine.hasWork) engine.step();
  } finally {
    engine.cancelAll();
    local.close();
    model.file.close();
  }
  return { tokens, drawn };
}

function fail(code: string): never {
  throw new Error(`request failed: ${code}`);
}
Deno.test("draws made together: every token and log-prob of a seeded batch as drawn row by row", () => {
  const alone = generateBatch(false);
  const together = generateBatch(true);
  assertEquals(alone.drawn, 0);
  // Six of the eight draw plainly, their 23 tokens after the first together (but where a
  // choice that started a step late draws its last one alone).
  assert(together.drawn >= 6 * 22 && together.drawn <= 6 * 23, `${together.drawn} drawn together`);
  SAMPLINGS.forEach((_, i) => {
    assertEquals(together.tokens[i].length, 24, `choice ${i}`);
    assertEquals(together.tokens[i], alone.tokens[i], `choice ${i}`);
  });
  // The draws' u decide: other seeds give every sampled choice other tokens.
  const reseeded = generateBatch(true, 100);
  SAMPLINGS.forEach((s, i) => {
    const same = reseeded.tokens[i].every((t, j) => t.id === together.tokens[i][j].id);
    assertEquals(same, !s.temperature, `choice ${i}`);
  });
  assert(together.tokens[4].every((t) => t.logprob !== undefined && t.top?.length === 3));
});

Deno.test("pool.drawRows: each row's token is nk_sample_draw's alone; bad rows and params are typed errors", () => {
  const kernels = new CpuKernels();
  const pool = kernels.createPool(2);
  const native = nativeSampling()!;
  try {
    const rng = new Rng(31);
    const width = 5000;
    const shapes = Object.values(LOGIT_ROWS);
    const rows = new Float32Array(12 * width);
    for (let r = 0; r < 12; r++) rows.set(shapes[r % shapes.length](rng, width), r * width);
    // Row 11's first value NaN: no candidate at all (-1), as a lone draw says.
    rows[11 * width] = NaN;
    const which = Int32Array.of(11, 3, 0, 7, 3, 9, 1, 10, 5);
    const draws: DrawParams[] = Array.from(which, (_, i) => ({
      temperature: [0.3, 0.8, 1.7][i % 3],
      cutoff: 30,
      topK: [0, 1, 40][i % 3],
      topP: [1, 0.37, 0.95][(i >> 1) % 3],
      minP: i % 4 === 0 ? 0.05 : 0,
      u: rng.float(),
    }));
    const params = packDraws(draws);
    const got = pool.drawRows(rows, width, which, params, EXP_TABLE);
    const want = Array.from(
      which,
      (r, i) => native.draw(rows.subarray(r * width, (r + 1) * width), draws[i]),
    );
    assertEquals(Array.from(got), want);
    assertEquals(got[0], -1);

    const invalid = (f: () => unknown) => {
      const err = assertThrows(f, CpuKernelError);
      assertEquals(err.code, "cpu_kernel_invalid");
    };
    invalid(() => pool.drawRows(rows, width, Int32Array.of(12), params, EXP_TABLE));
    invalid(() => pool.drawRows(rows, width, Int32Array.of(-1), params, EXP_TABLE));
    invalid(() => pool.drawRows(rows, width, which, params.subarray(0, 6), EXP_TABLE));
    invalid(() => pool.drawRows(rows, width, which, params, EXP_TABLE.subarray(0, 100)));
  } finally {
    pool.destroy();
  }
});

Deno.test("HostDraws: a device runner's own threads draw as the CPU pool does, started at the first draw", () => {
  const host = HostDraws.open(2)!;
  const kernels = new CpuKernels();
  const pool = kernels.createPool(1);
  try {
    const rng = new Rng(5);
    const width = 3000;
    const rows = new Float32Array(4 * width);
    for (let r = 0; r < 4; r++) rows.set(LOGIT_ROWS.flat(rng, width), r * width);
    const which = Int32Array.of(3, 0, 2, 1, 3);
    const params = packDraws(
      Array.from(which, () => ({
        temperature: 1,
        cutoff: 30,
        topK: 0,
        topP: 0.9,
        minP: 0,
        u: rng.float(),
      })),
    );
    assertEquals(
      Array.from(host.drawRows(rows, width, which, params, EXP_TABLE)),
      Array.from(pool.drawRows(rows, width, which, params, EXP_TABLE)),
    );
    assertEquals(host.threads, 2);
    assertEquals(HostDraws.open(1000)!.threads, 16, "a GPU host's many cores: 16 at most");
  } finally {
    host.close();
    host.close();
    pool.destroy();
  }
});
