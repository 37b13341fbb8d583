/**
 * n choices of one prompt on a model whose next-token distributions are flat (random
 * weights), so that sampling at temperature 1 tells the choices apart: the prompt runs once
 * and the other choices fork at its end (prefill counted once, their blocks shared or
 * copied, none left behind), each choice draws from its own stream (all different; the
 * same seed gives the same choices, and choice 0 what a request of one choice draws), a
 * cache that cannot copy part of a block gives the same choices (the others then run the
 * prompt's last block themselves), and a cancel ends every choice.
 */

import { assert, assertEquals, assertNotEquals } from "../support/assert.ts";
import {
  Engine,
  type EngineFinish,
  type EngineRequest,
  GREEDY,
  type SequenceObserver,
} from "../../src/engine/mod.ts";
import { writeSyntheticQwen3 } from "../../src/models/qwen3_synthetic.ts";
import { type ModelRunner, openModel, openRunner } from "../../src/runner/mod.ts";

const VOCAB = 512;
const PROMPT = Array.from({ length: 37 }, (_, i) => (i * 37 + 11) % VOCAB);

interface Choice {
  ids: number[];
  finish: EngineFinish | null;
}

function collect(n: number): { choices: Choice[]; observers: SequenceObserver[] } {
  const choices = Array.from({ length: n }, (): Choice => ({ ids: [], finish: null }));
  const observers = choices.map((c): SequenceObserver => ({
    token: (t) => (c.ids.push(t.id), false),
    finished: (reason) => (c.finish = reason),
    failed: (code) => {
      throw new Error(`failed: ${code}`);
    },
  }));
  return { choices, observers };
}

function request(seed: number | undefined, maxTokens = 12): EngineRequest {
  return {
    id: "r",
    prompt: PROMPT,
    maxTokens,
    sampling: { ...GREEDY, temperature: 1, ...(seed === undefined ? {} : { seed }) },
    stopTokenIds: [],
  };
}

/** Without copyKvRows: a cache spread over processes (tensor parallelism) has none. */
function withoutCopy(r: ModelRunner): ModelRunner {
  return {
    shape: r.shape,
    device: r.device,
    kvBytes: r.kvBytes,
    forward: ((step, interrupt) => r.forward(step, interrupt)) as ModelRunner["forward"],
    forwardArgmax: (step, interrupt, masks) => r.forwardArgmax(step, interrupt, masks),
    deviceBytes: () => r.deviceBytes(),
    close: () => r.close(),
  };
}

async function withEngine(
  copy: boolean,
  fn: (engine: Engine) => void,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/flat.gguf`;
  writeSyntheticQwen3(path, {
    shape: {
      hidden: 64,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      headDim: 16,
      ffn: 128,
      vocab: VOCAB,
      tiedOutput: true,
    },
    quant: "f16",
    seed: 5,
  });
  const model = openModel(path);
  const kv = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };
  const local = openRunner(model, { device: "cpu", threads: 1 }, kv);
  const engine = new Engine(copy ? local : withoutCopy(local), {
    contextLength: 512,
    maxSequences: 8,
    maxBatchTokens: 64,
    kv,
  });
  try {
    fn(engine);
  } finally {
    engine.cancelAll();
    local.close();
    model.file.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function generate(engine: Engine, req: EngineRequest, n: number): Choice[] {
  const { choices, observers } = collect(n);
  engine.submit(req, observers);
  while (engine.hasWork) engine.step();
  return choices;
}

Deno.test("n choices: one prefill, four different choices, reproducible by seed", async () => {
  let seeded: Choice[] = [];
  await withEngine(true, (engine) => {
    seeded = generate(engine, request(7), 4);
    const stats = engine.stats();
    assertEquals(stats.prefillTokens, PROMPT.length, "the prompt ran once");
    assertEquals(stats.kvBlocksUsed, 0, "every block given back");
    for (const c of seeded) assertEquals([c.ids.length, c.finish], [12, "length"]);
    const distinct = new Set(seeded.map((c) => c.ids.join(",")));
    assertEquals(distinct.size, 4, "four different choices");
    assertEquals(generate(engine, request(7), 4), seeded, "the same seed, the same choices");
    assertEquals(generate(engine, request(7), 1)[0], seeded[0], "choice 0 is n=1's draw");
    assertNotEquals(generate(engine, request(8), 4), seeded, "another seed, other choices");
    const unseeded = generate(engine, request(undefined), 4);
    assertEquals(new Set(unseeded.map((c) => c.ids.join(","))).size, 4);
  });
  await withEngine(false, (engine) => {
    assertEquals(generate(engine, request(7), 4), seeded, "the same choices without copies");
    // Three choices ran the prompt's last, partial block again; the rest was shared.
    const partial = PROMPT.length % 16;
    assertEquals(engine.stats().prefillTokens, PROMPT.length + 3 * partial);
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});

Deno.test("n choices: a cancel ends every choice, queued or forked; max_tokens 0 ends them all", async () => {
  await withEngine(true, (engine) => {
    const { choices, observers } = collect(3);
    engine.submit(request(1, 100), observers);
    engine.cancel("r");
    assert(choices.every((c) => c.finish === "cancelled"), "cancelled before the prompt ran");
    const later = collect(3);
    engine.submit(request(1, 100), later.observers);
    while (later.choices.some((c) => c.ids.length < 2)) engine.step();
    engine.cancel("r");
    assert(later.choices.every((c) => c.finish === "cancelled"), "cancelled while decoding");
    while (engine.hasWork) engine.step();
    assertEquals(engine.stats().kvBlocksUsed, 0);
    const none = generate(engine, request(1, 0), 3);
    assertEquals(none, Array.from({ length: 3 }, () => ({ ids: [], finish: "length" })));
  });
});
