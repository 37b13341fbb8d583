/**
 * Continuous batching on the CPU backend: outputs do not depend on batch company, the
 * prefix cache serves shared prompts, preemption under a small KV pool changes nothing
 * but timing, prefill steps stopped for arrivals change nothing either, and a soak of
 * mixed and cancelled requests leaves no block behind.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { fixture, type GoldenPrompt, modelGolden } from "../fixtures.ts";
import { Engine, type EngineRequest, GREEDY } from "../../src/engine/mod.ts";
import type { GenerateRequest, UsageCounts } from "../../src/frontend/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { ModelHost } from "../../src/harness/native/model_host.ts";
import type { ModelLoadOptions } from "../../src/harness/native/model_session.ts";
import { openModel, openRunner } from "../../src/runner/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";

const golden = modelGolden("qwen3-tiny-q8_0");
const byName = (name: string): GoldenPrompt => golden.prompts.find((p) => p.name === name)!;

function start(over: Partial<ModelLoadOptions> = {}): Promise<ModelHost> {
  return ModelHost.start({
    modelPath: fixture("qwen3-tiny-q8_0.gguf"),
    device: "cpu",
    threads: 1,
    contextLength: 2048,
    maxSequences: 16,
    maxBatchTokens: 256,
    kvDtype: "f16",
    ...over,
  });
}

interface Outcome {
  ids: number[];
  finish: string;
  usage: UsageCounts | null;
}

async function run(
  host: ModelHost,
  req: GenerateRequest,
  cancelAfter = Infinity,
): Promise<Outcome> {
  const stream = await host.generate(req);
  const ids: number[] = [];
  let finish = "";
  let usage: UsageCounts | null = null;
  for await (const ev of stream) {
    if (ev.type === "delta") {
      ids.push(...ev.tokens.map((t) => t.id));
      if (ids.length >= cancelAfter) stream.cancel();
    } else if (ev.type === "done") {
      finish = ev.fault ? `error:${ev.fault.code}` : ev.finishReason;
      usage = ev.usage;
    }
  }
  return { ids, finish, usage };
}

function greedy(id: string, ids: number[], maxTokens: number): GenerateRequest {
  return { id, prompt: { kind: "tokens", ids }, maxTokens, sampling: GREEDY, ignoreEos: true };
}

Deno.test("batching: every golden alone equals the same golden inside 16 mixed requests", async () => {
  const host = await start();
  try {
    const goldens = golden.prompts;
    const mixed: GenerateRequest[] = goldens.map((p, i) => greedy(`g${i}`, p.tokens, 32));
    // Company with other lengths, sampling settings and stops.
    mixed.push({
      ...greedy("s1", byName("text_fox").tokens, 20),
      sampling: { ...GREEDY, temperature: 5, seed: 3 },
    });
    mixed.push({ ...greedy("s2", byName("chat_hello").tokens, 9), stop: ["Con"] });
    const together = await Promise.all(mixed.map((r) => run(host, r)));
    goldens.forEach((p, i) => {
      assertEquals(
        together[i].ids,
        p.greedy.map((g) => g.id),
        `${p.name} in a batch of ${mixed.length}`,
      );
    });
    const seededAlone = await run(host, mixed[goldens.length]);
    assertEquals(together[goldens.length].ids, seededAlone.ids, "seeded sampling ignores company");
    assertEquals((await host.stats()).kvBlocksUsed, 0);
  } finally {
    await host.close();
  }
});

Deno.test("prefix cache: a shared long prompt is reused and reported as cached", async () => {
  const host = await start();
  try {
    const system = byName("raw_random600").tokens;
    const first = await run(host, greedy("p1", [...system, 9707], 4));
    const second = await run(host, greedy("p2", [...system, 785, 3974], 4));
    assertEquals(first.usage!.cachedTokens, 0);
    const cached = second.usage!.cachedTokens;
    assert(cached >= 0.9 * system.length, `cached ${cached} of ${system.length + 2}`);
    assertEquals(cached % 16, 0, "whole blocks");
    const stats = await host.stats();
    assert(stats.prefixHits >= cached / 16, "hits counted");
    // Reuse must not change results: the same prompt again gives the same tokens.
    const again = await run(host, greedy("p3", [...system, 9707], 4));
    assertEquals(again.ids, first.ids);
    assert(again.usage!.cachedTokens >= 0.9 * system.length);
  } finally {
    await host.close();
  }
});

Deno.test("prefix cache: a chat turn reuses the last one up to its last <|im_start|>, to the token", async () => {
  const vocab = openGguf(fixture("qwen3-tiny-q8_0.gguf"));
  const imStart = loadTokenizer(vocab).tokenId("<|im_start|>")!;
  vocab.close();
  // 37 tokens, then a turn's opening: the boundary (38) falls inside the third block.
  const history = [...byName("raw_random600").tokens.slice(0, 37), imStart];
  const first = [...history, 872, 198, 9707];
  const second = { ...greedy("t2", [...history, 77091, 198, 1234, 5678], 4), topLogits: 8 };
  /** Each step's raw top logits: what copied K/V rows must reproduce exactly. */
  const logits = async (host: ModelHost): Promise<{ cached: number; top: number[][] }> => {
    const stream = await host.generate(second);
    const top: number[][] = [];
    let cached = -1;
    for await (const ev of stream) {
      if (ev.type === "delta") top.push(...ev.tokens.map((t) => t.topLogits!.flat()));
      if (ev.type === "done") cached = ev.usage.cachedTokens;
    }
    return { cached, top };
  };
  const host = await start();
  const fresh = await start();
  try {
    await run(host, greedy("t1", first, 4));
    const reused = await logits(host);
    assertEquals(reused.cached, history.length, "two whole blocks and 6 copied rows");
    const alone = await logits(fresh);
    assertEquals(alone.cached, 0);
    // Equal but for rounding (~1e-5): the rest of the prompt ran in a step of another size.
    const ids = (top: number[][]) => top.map((t) => t.filter((_, i) => i % 2 === 0));
    assertEquals(ids(reused.top), ids(alone.top));
    const diff = Math.max(
      ...reused.top.flatMap((t, step) => t.map((v, i) => Math.abs(v - alone.top[step][i]))),
    );
    assert(diff < 1e-3, `logits differ by ${diff}`);
    assertEquals((await host.stats()).kvBlocksUsed, 0);
  } finally {
    await host.close();
    await fresh.close();
  }
});

Deno.test("preemption: a KV pool too small for everyone delays but does not change outputs", async () => {
  // 256 positions of cache for 8 requests of ~100 positions each.
  const host = await start({ contextLength: 256, maxSequences: 8 });
  try {
    const prompts = golden.prompts.filter((p) => p.tokens.length < 60).slice(0, 8);
    const reqs = prompts.map((p, i) => greedy(`q${i}`, p.tokens, 40));
    const alone: Outcome[] = [];
    for (const r of reqs) alone.push(await run(host, { ...r, id: `a-${r.id}` }));
    const together = await Promise.all(reqs.map((r) => run(host, r)));
    together.forEach((t, i) => assertEquals(t.ids, alone[i].ids, prompts[i].name));
    const stats = await host.stats();
    assert(stats.preemptions > 0, "the pool was too small: someone was preempted");
    assertEquals(stats.kvBlocksUsed, 0);
  } finally {
    await host.close();
  }
});

Deno.test("interrupted prefill: arrivals stop a long prompt's steps, and no output changes", async () => {
  const longPrompt = Array(5).fill(byName("raw_random600").tokens).flat();
  const shorts = golden.prompts.filter((p) => p.tokens.length < 40).slice(0, 8);
  const aloneHost = await start({ contextLength: 4096 });
  // Short steps, so that the long prompt takes many and arrivals land inside them.
  const host = await start({ contextLength: 4096, stepTargetMs: 20 });
  try {
    // An arrival stops only a step it lands in. A busy machine can keep this thread away
    // until the long prompt's prefill is over; then the round runs again, on a prompt the
    // prefix cache does not hold. Every round's outputs are checked.
    for (let round = 0; round < 4; round++) {
      const long = greedy(`long${round}`, longPrompt.slice(round), 16);
      const alone = await run(aloneHost, long);
      const prefilled = (await host.stats()).prefillTokens;
      const longRun = run(host, long);
      // The arrivals start once the long prompt's prefill is under way: they could otherwise
      // all come before its first step and join it uninterrupted.
      while ((await host.stats()).prefillTokens === prefilled) {
        await new Promise((r) => setTimeout(r, 5));
      }
      const shortRuns: Array<Promise<Outcome>> = [];
      for (const [i, p] of shorts.entries()) {
        await new Promise((r) => setTimeout(r, 10));
        shortRuns.push(run(host, greedy(`short${round}-${i}`, p.tokens, 8)));
      }
      assertEquals((await longRun).ids, alone.ids, "the long prompt");
      const outcomes = await Promise.all(shortRuns);
      outcomes.forEach((o, i) => {
        assertEquals(o.ids, shorts[i].greedy.slice(0, 8).map((g) => g.id), shorts[i].name);
      });
      if ((await host.stats()).interruptedSteps > 0) break;
    }
    const stats = await host.stats();
    assert(stats.interruptedSteps > 0, "an arrival interrupted a prefill step");
    assertEquals(stats.kvBlocksUsed, 0);
  } finally {
    await host.close();
    await aloneHost.close();
  }
});

Deno.test("soak: 500 mixed requests with random cancellations leave no block behind", async () => {
  const host = await start({ contextLength: 512, maxSequences: 12, maxBatchTokens: 128 });
  try {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    const prompts = golden.prompts.filter((p) => p.tokens.length < 200).map((p) => p.tokens);
    const outcomes: Outcome[] = [];
    for (let wave = 0; wave < 10; wave++) {
      const batch = Array.from({ length: 50 }, (_, i) => {
        const n = wave * 50 + i;
        const req: GenerateRequest = {
          ...greedy(`soak${n}`, prompts[rand(prompts.length)], 1 + rand(24)),
          sampling: rand(2) ? GREEDY : { ...GREEDY, temperature: 1, topP: 0.9, seed: n },
          stop: rand(4) === 0 ? ["e"] : undefined,
        };
        return run(host, req, rand(3) === 0 ? 1 + rand(5) : Infinity);
      });
      outcomes.push(...await Promise.all(batch));
    }
    assertEquals(outcomes.length, 500);
    for (const o of outcomes) {
      assert(["stop", "length", "cancelled"].includes(o.finish), `unexpected end ${o.finish}`);
    }
    const stats = await host.stats();
    assertEquals(stats.kvBlocksUsed, 0, "no leaked KV blocks");
    assertEquals(stats.running + stats.waiting, 0);
  } finally {
    await host.close();
  }
});

/** The engine core alone, on token ids (no front end, no Worker), over the tiny model. */
function withEngine(fn: (engine: Engine) => void): void {
  const model = openModel(fixture("qwen3-tiny-q8_0.gguf"));
  const kv = { blockSize: 16, nBlocks: 128, dtype: "f16" as const };
  const runner = openRunner(model, { device: "cpu", threads: 1 }, kv);
  const engine = new Engine(runner, {
    contextLength: 2048,
    maxSequences: 4,
    maxBatchTokens: 64,
    kv,
  });
  try {
    fn(engine);
  } finally {
    engine.cancelAll();
    runner.close();
    model.file.close();
  }
}

/** A greedy request of token ids, ignoring end-of-generation tokens. */
function idsRequest(id: string, prompt: number[], maxTokens: number): EngineRequest {
  return { id, prompt, maxTokens, sampling: GREEDY, stopTokenIds: [] };
}

Deno.test("interrupted prefill: a moved word stops a step that feeds a prompt, never two in a row", () => {
  withEngine((engine) => {
    const long = byName("raw_random600");
    const ids: number[] = [];
    engine.submit(idsRequest("long", long.tokens, 8), {
      token: (t) => (ids.push(t.id), false),
      finished: () => {},
      failed: () => {},
    });
    const word = new Int32Array(new SharedArrayBuffer(4));
    const stepped = () => engine.stats().steps;
    engine.step({ word, seen: 0 });
    assertEquals([stepped(), engine.stats().interruptedSteps], [1, 0], "an unmoved word");
    word[0] = 1;
    engine.step({ word, seen: 0 });
    assertEquals([stepped(), engine.stats().interruptedSteps], [1, 1], "stopped, nothing fed");
    engine.step({ word, seen: 0 });
    assertEquals([stepped(), engine.stats().interruptedSteps], [2, 1], "the next runs whole");
    while (engine.stats().decodeTokens === 0) engine.step({ word, seen: 1 });
    const stopped = engine.stats().interruptedSteps;
    while (engine.hasWork) engine.step({ word, seen: 0 });
    assertEquals(engine.stats().interruptedSteps, stopped, "decode-only steps run whole");
    assertEquals(ids, long.greedy.slice(0, 8).map((g) => g.id));
  });
});

Deno.test("engine core: a cancel between two steps stops its sequence there and frees its blocks", () => {
  withEngine((engine) => {
    const ids: number[] = [];
    let ended = "";
    engine.submit(
      idsRequest("c", byName("text_fox").tokens, 500),
      {
        token: (t) => (ids.push(t.id), false),
        finished: (reason) => (ended = reason),
        failed: () => {},
      },
    );
    while (ids.length < 3) engine.step();
    engine.cancel("c");
    assertEquals(ended, "cancelled");
    while (engine.hasWork) engine.step();
    assertEquals(ids.length, 3, "no token after the cancel");
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});
