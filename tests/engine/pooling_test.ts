/**
 * The engine core with a pooling model (the embedding fixture): it takes only pooled
 * requests and a generating engine none; pooled prompts that share a prefix reuse its
 * cached blocks (last-token pooling) and pool as they do alone; mean pooling never starts
 * from a cached prefix; a cancel or a failed step ends pooled requests and frees their
 * blocks; a session refuses a batch with one input too long before queueing any of it.
 */

import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { pooledFixture } from "../fixtures/pooled/mod.ts";
import { Engine, EngineError, type EngineRequest, GREEDY } from "../../src/engine/mod.ts";
import type { Pooling } from "../../src/models/pooling.ts";
import { openModel, openRunner } from "../../src/runner/mod.ts";
import { NeuronError } from "../../src/common/errors.ts";
import { openSession, pool } from "../embeddings/support.ts";

function withEngine(path: string, hidden: boolean, fn: (engine: Engine) => void): void {
  const model = openModel(path);
  const kv = { blockSize: 16, nBlocks: 64, dtype: "f16" as const };
  const runner = openRunner(model, { device: "cpu", threads: 1 }, kv);
  const engine = new Engine(runner, {
    contextLength: 1024,
    maxSequences: 8,
    maxBatchTokens: 256,
    kv,
    hidden,
  });
  try {
    fn(engine);
  } finally {
    engine.cancelAll();
    runner.close();
    model.file.close();
  }
}

function pooled(id: string, prompt: number[], pooling: Pooling = "last"): EngineRequest {
  return { id, prompt, sampling: GREEDY, stopTokenIds: [], pooling };
}

interface Outcome {
  vector: Float32Array | null;
  end: string;
}

function submit(engine: Engine, req: EngineRequest): Outcome {
  const out: Outcome = { vector: null, end: "" };
  engine.submit(req, {
    token: () => false,
    pooled: (v) => (out.vector = v),
    finished: (reason) => (out.end = reason),
    failed: (code) => (out.end = `failed:${code}`),
  });
  return out;
}

const PREFIX = Array.from({ length: 40 }, (_, i) => 1000 + i);

Deno.test("pooling engine: pooled requests only, and a generating engine none", () => {
  withEngine(pooledFixture("qwen3-embed-tiny-f16"), true, (engine) => {
    const err = assertThrows(
      () =>
        engine.submit({ ...pooled("g", [1, 2]), pooling: undefined, maxTokens: 4 }, {
          token: () => false,
          finished: () => {},
          failed: () => {},
        }),
      EngineError,
    );
    assertEquals(err.code, "invalid_request");
  });
  withEngine(fixture("qwen3-tiny-q8_0.gguf"), false, (engine) => {
    const err = assertThrows(() => submit(engine, pooled("p", [1, 2])), EngineError);
    assertEquals(err.code, "invalid_request");
  });
});

Deno.test("pooling engine: a shared prefix is reused by last pooling, never by mean", () => {
  withEngine(pooledFixture("qwen3-embed-tiny-f16"), true, (engine) => {
    const alone = submit(engine, pooled("a", [...PREFIX, 7, 8]));
    while (engine.hasWork) engine.step();
    const hitsBefore = engine.stats().prefixHits;
    const again = submit(engine, pooled("b", [...PREFIX, 7, 8]));
    const other = submit(engine, pooled("c", [...PREFIX, 9]));
    while (engine.hasWork) engine.step();
    assert(engine.stats().prefixHits > hitsBefore, "the prefix's blocks were reused");
    assertEquals([again.end, other.end], ["stop", "stop"]);
    // Reused K/V serve as the computed ones: the same vector, bit for bit.
    assertEquals(Array.from(again.vector!), Array.from(alone.vector!));

    const meanAlone = submit(engine, pooled("m1", [...PREFIX, 7, 8], "mean"));
    while (engine.hasWork) engine.step();
    const hits = engine.stats().prefixHits;
    const meanAgain = submit(engine, pooled("m2", [...PREFIX, 7, 8], "mean"));
    while (engine.hasWork) engine.step();
    assertEquals(engine.stats().prefixHits, hits, "mean pooling runs every position");
    assertEquals(Array.from(meanAgain.vector!), Array.from(meanAlone.vector!));
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});

Deno.test("pooling engine: cancelled or failed pooled requests end and free their blocks", () => {
  withEngine(pooledFixture("qwen3-embed-tiny-f16"), true, (engine) => {
    const long = Array.from({ length: 600 }, (_, i) => 2000 + i);
    const cancelled = submit(engine, pooled("x", long, "mean"));
    engine.step();
    engine.cancel("x");
    assertEquals([cancelled.end, cancelled.vector], ["cancelled", null]);
    const failed = submit(engine, pooled("y", long));
    engine.step();
    engine.failAll("internal_error", "a step failed");
    assertEquals([failed.end, failed.vector], ["failed:internal_error", null]);
    assertEquals(engine.hasWork, false);
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});

Deno.test("pooling session: one input too long refuses the request, nothing queued", async () => {
  const session = openSession(pooledFixture("qwen3-embed-tiny-f16"));
  try {
    const inputs = [{ kind: "text" as const, text: "fine" }, {
      kind: "tokens" as const,
      ids: Array.from({ length: 3000 }, () => 5),
    }];
    const err = await assertRejects(() => pool(session, inputs), NeuronError);
    assertEquals(err.code, "context_length_exceeded");
    assertEquals([session.hasWork, session.stats().kvBlocksUsed], [false, 0]);
    const ok = await pool(session, [inputs[0]]);
    assertEquals(ok.vectors.length, 1);
  } finally {
    session.close();
  }
});
