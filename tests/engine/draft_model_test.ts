/**
 * Draft-model speculation in the engine core: a second model of the same vocabulary drafts
 * k tokens per verification with its own KV cache. Greedy output equals plain decoding's
 * whether the draft agrees with the target (a quantization of the same fixture: nearly
 * every draft taken) or not (another fixture: drafts refused); long prompts catch the draft
 * model up over several steps; draft, prompt-lookup and plain sequences share steps.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { familyFixture, fixture, type GoldenPrompt, modelGolden } from "../fixtures.ts";
import {
  delta,
  DRAFT,
  FORCED,
  generate,
  ids,
  OFF,
  request,
  submit,
  withEngine,
  workloads,
} from "./spec_support.ts";
import { EngineError, GREEDY } from "../../src/engine/mod.ts";

const TARGET = fixture("qwen3-tiny-f16.gguf");
const golden = modelGolden("qwen3-tiny-f16");
const byName = (name: string): GoldenPrompt => golden.prompts.find((p) => p.name === name)!;

Deno.test("draft model: a draft that agrees is taken; output is plain decoding's", () => {
  withEngine(
    TARGET,
    (engine) => {
      for (const name of ["raw_hello", "text_code", "chat_tools"]) {
        const prompt = byName(name).tokens;
        const plain = generate(engine, request("p", prompt, 64, OFF));
        const spec = generate(engine, request("s", prompt, 64, DRAFT));
        assertEquals(ids(spec), ids(plain), name);
        assertEquals(ids(plain).slice(0, 32), byName(name).greedy.map((g) => g.id));
        const s = spec.stats;
        assert(
          s.specAccepted >= 0.9 * s.specDrafted,
          `${name}: ${s.specAccepted}/${s.specDrafted}`,
        );
        assert(s.specVerifications <= 64 / 3, `${name}: ${s.specVerifications} verifications`);
      }
      assertEquals(engine.stats().kvBlocksUsed, 0);
    },
    { draft: fixture("qwen3-tiny-q8_0.gguf") },
  );
});

Deno.test("draft model: a draft that disagrees is refused; output is plain decoding's", () => {
  withEngine(
    TARGET,
    (engine) => {
      const prompt = byName("text_code").tokens;
      const plain = generate(engine, request("p", prompt, 64, OFF));
      const spec = generate(engine, request("s", prompt, 64, DRAFT));
      assertEquals(ids(spec), ids(plain));
      const s = spec.stats;
      assert(s.specDrafted > 2 * s.specAccepted, `${s.specAccepted} of ${s.specDrafted} accepted`);
    },
    { draft: fixture("qwen3-small-q4_k_m.gguf") },
  );
});

Deno.test("draft model: long prompts, sampling, and steps shared with lookup and plain", () => {
  const long = byName("raw_random600").tokens;
  const hello = byName("raw_hello").tokens;
  const chain = byName("raw_hello").greedy.map((g) => g.id);
  const copy = workloads(hello, chain).copy;
  const sampling = { ...GREEDY, temperature: 4, topK: 40, seed: 3 };
  const alone = withEngine(TARGET, (engine) => [
    ids(generate(engine, request("a", long, 24, OFF))),
    ids(generate(engine, request("b", copy, 40, OFF))),
    ids(generate(engine, request("c", hello, 40, OFF))),
    ids(generate(engine, request("d", hello, 24, OFF, { sampling }))),
  ]);
  withEngine(
    TARGET,
    (engine) => {
      const before = engine.stats();
      const runs = [
        submit(engine, request("a", long, 24, DRAFT)),
        submit(engine, request("b", copy, 40, FORCED)),
        submit(engine, request("c", hello, 40, OFF)),
        submit(engine, request("d", hello, 24, DRAFT, { sampling })),
      ];
      while (engine.hasWork) engine.step();
      assertEquals(runs.map(ids), alone);
      const d = delta(engine.stats(), before);
      assert(d.specAccepted > 40, JSON.stringify(d));
      assertEquals(engine.stats().kvBlocksUsed, 0);
    },
    { draft: fixture("qwen3-tiny-q4_0.gguf") },
  );
});

Deno.test("draft model: none loaded, draft mode is refused; another vocabulary, the engine", async () => {
  withEngine(TARGET, (engine) => {
    let err: unknown;
    try {
      submit(engine, request("x", byName("raw_hello").tokens, 4, DRAFT));
    } catch (e) {
      err = e;
    }
    assert(err instanceof EngineError && err.code === "invalid_request", String(err));
  });
  const llama = await familyFixture("llama3", "q8_0");
  let err: unknown;
  try {
    withEngine(TARGET, () => {}, { draft: llama });
  } catch (e) {
    err = e;
  }
  assert(err instanceof EngineError && /vocabulary/.test(err.message), String(err));
});
