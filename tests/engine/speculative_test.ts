/**
 * Speculative decoding (prompt lookup) in the engine core: greedy output is token for
 * token what plain decoding gives, on every Qwen3 golden fixture and every family fixture,
 * with drafts accepted (a prompt the continuation copies) and rejected (a copy with every
 * fifth token changed); seeded sampling, log-probs, penalties, bias, constraints, stop
 * tokens and max_tokens are unchanged by it; and verifications share steps with other
 * sequences' decodes and prompt chunks.
 */

import { assert, assertEquals } from "../support/assert.ts";
import {
  FAMILIES,
  familyFixture,
  fixture,
  type GoldenPrompt,
  MODEL_FIXTURES,
  modelGolden,
} from "../fixtures.ts";
import { GREEDY, type SampledToken, type TokenFilter } from "../../src/engine/mod.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { loadTokenizer } from "../../src/tokenizer/mod.ts";
import { familyPrompts, promptText } from "../models/family_prompts.ts";
import {
  delta,
  FORCED,
  generate,
  ids,
  OFF,
  request,
  submit,
  withEngine,
  workloads,
} from "./spec_support.ts";

const TOKENS = 64;
/** Log-probs of rows computed several at a time differ from one row's in the last digits
 * of the kernels' sums (Q8_0 here). */
const LOGPROB_TOLERANCE = 0.02;

/** Plain and speculative greedy output on the copy and noisy workloads over `base`. */
function checkIdentity(path: string, base: number[], label: string): void {
  withEngine(path, (engine) => {
    const chain = ids(generate(engine, request("chain", base, TOKENS, OFF)));
    const { copy, noisy } = workloads(base, chain);
    for (const [name, prompt] of [["copy", copy], ["noisy", noisy]] as const) {
      const plain = generate(engine, request(`p-${name}`, prompt, TOKENS, OFF));
      const spec = generate(engine, request(`s-${name}`, prompt, TOKENS, FORCED));
      assertEquals(ids(spec), ids(plain), `${label} ${name}`);
      assertEquals(plain.tokens.length, TOKENS);
      assertEquals(plain.stats.specDrafted, 0, "plain decoding drafts nothing");
      const s = spec.stats;
      assert(s.specAccepted > 0, `${label} ${name}: no draft was accepted`);
      assertEquals(s.specAccepted + s.specVerifications >= s.specTokens, true);
      if (name === "copy") {
        assert(s.specAccepted >= TOKENS / 2, `${label} copy: ${s.specAccepted} accepted`);
      } else {
        assert(s.specDrafted > s.specAccepted, `${label} noisy: nothing was rejected`);
      }
      assertEquals(engine.stats().kvBlocksUsed, 0, "rolled-back blocks all returned");
    }
  });
}

for (const model of MODEL_FIXTURES) {
  Deno.test(`speculative: ${model}, greedy output equals plain decoding's (copy, noisy)`, () => {
    const golden = modelGolden(model);
    for (const name of ["raw_hello", "text_code"]) {
      const p = golden.prompts.find((g) => g.name === name)!;
      checkIdentity(fixture(`${model}.gguf`), p.tokens, `${model} ${name}`);
    }
  });
}

for (const family of FAMILIES) {
  Deno.test(`speculative: ${family} fixture, greedy output equals plain decoding's`, async () => {
    const path = await familyFixture(family, "q8_0");
    const file = openGguf(path);
    let base: number[];
    try {
      const prompt = familyPrompts(family).find((p) => p.name === "text_story")!;
      const { text, addSpecial } = promptText(file, prompt);
      base = loadTokenizer(file).encode(text, { parseSpecial: true, addSpecial });
    } finally {
      file.close();
    }
    checkIdentity(path, base, family);
  });
}

const tiny = modelGolden("qwen3-tiny-q8_0");
const byName = (name: string): GoldenPrompt => tiny.prompts.find((p) => p.name === name)!;

/** The copy workload over `raw_hello` on the tiny model, and its plain continuation. */
function tinyCopy(): { prompt: number[]; chain: number[] } {
  const base = byName("raw_hello").tokens;
  return withEngine(fixture("qwen3-tiny-q8_0.gguf"), (engine) => {
    const chain = ids(generate(engine, request("chain", base, TOKENS, OFF)));
    return { prompt: workloads(base, chain).copy, chain };
  });
}

Deno.test("speculative: seeded sampling draws the same tokens with speculation as without", () => {
  const { prompt } = tinyCopy();
  withEngine(fixture("qwen3-tiny-q8_0.gguf"), (engine) => {
    let drafted = 0, accepted = 0;
    for (const seed of [1, 3, 4]) {
      // Hot enough that the copy is left now and then, so drafts are rejected too.
      const sampling = { ...GREEDY, temperature: 4, topK: 40, seed };
      const plain = generate(engine, request("p", prompt, 32, OFF, { sampling }));
      const spec = generate(engine, request("s", prompt, 32, FORCED, { sampling }));
      assertEquals(ids(spec), ids(plain), `seed ${seed}`);
      drafted += spec.stats.specDrafted;
      accepted += spec.stats.specAccepted;
    }
    assert(accepted > 0 && drafted > accepted, `${accepted} of ${drafted} drafts accepted`);
  });
});

/**
 * Same tokens, and log-probs equal to float rounding: a verification computes its rows
 * together, as a step computes the rows of sequences decoded together.
 */
function assertSameTokens(actual: SampledToken[], expected: SampledToken[], label: string): void {
  assertEquals(actual.map((t) => t.id), expected.map((t) => t.id), label);
  const near = (a: number | undefined, b: number | undefined): boolean =>
    a === b || Math.abs(a! - b!) < LOGPROB_TOLERANCE;
  expected.forEach((e, i) => {
    const a = actual[i];
    assert(near(a.logprob, e.logprob), `${label} token ${i}: ${a.logprob} vs ${e.logprob}`);
    assertEquals(a.top?.map((t) => t.id), e.top?.map((t) => t.id), `${label} top ${i}`);
    e.top?.forEach((t, j) => assert(near(a.top![j].logprob, t.logprob), `${label} top ${i}`));
  });
}

Deno.test("speculative: log-probs, penalties, logit bias, stop tokens and max_tokens are unchanged", () => {
  const { prompt, chain } = tinyCopy();
  withEngine(fixture("qwen3-tiny-q8_0.gguf"), (engine) => {
    const sampling = {
      ...GREEDY,
      logprobs: true,
      topLogprobs: 3,
      repetitionPenalty: 1.05,
      presencePenalty: 0.3,
      frequencyPenalty: 0.2,
      logitBias: new Map([[chain[30], -40]]),
    };
    const cases = [
      { name: "sampling chain", over: { sampling }, max: 41 },
      { name: "stop token", over: { stopTokenIds: [chain[20]] }, max: TOKENS },
      { name: "max_tokens", over: {}, max: 13 },
      { name: "top logits", over: { topLogits: 4 }, max: 24 },
    ];
    for (const { name, over, max } of cases) {
      const plain = generate(engine, request("p", prompt, max, OFF, over));
      const spec = generate(engine, request("s", prompt, max, FORCED, over));
      assertSameTokens(spec.tokens, plain.tokens, name);
      assertEquals(spec.finish, plain.finish, name);
      assert(spec.stats.specAccepted > 0, `${name}: no draft was accepted`);
    }
    const stopped = generate(engine, request("p", prompt, TOKENS, FORCED, cases[1].over));
    assertEquals(ids(stopped), chain.slice(0, 21), "ends at the stop token, nothing after");
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});

/** Refuses one token, and says so of drafts (as structured output's matcher does). */
class Refuse implements TokenFilter {
  admitted: number[] = [];
  constructor(readonly banned: number) {}
  restrict(logits: Float32Array, from = logits): boolean {
    logits.set(from.subarray(0, logits.length));
    logits[this.banned] = -Infinity;
    return true;
  }
  accept(): void {}
  admits(draft: readonly number[]): number {
    const n = draft.indexOf(this.banned);
    this.admitted.push(n < 0 ? draft.length : n);
    return n < 0 ? draft.length : n;
  }
}

Deno.test("speculative: a constraint's refused token ends the draft, and output is unchanged", () => {
  const { prompt, chain } = tinyCopy();
  withEngine(fixture("qwen3-tiny-q8_0.gguf"), (engine) => {
    const plain = generate(engine, request("p", prompt, 40, OFF, { filter: new Refuse(chain[9]) }));
    const filter = new Refuse(chain[9]);
    const spec = generate(engine, request("s", prompt, 40, FORCED, { filter }));
    assertEquals(ids(spec), ids(plain));
    assert(!ids(plain).includes(chain[9]), "the refused token never comes");
    assert(filter.admitted.some((n) => n < FORCED.k), "a draft was cut at the refused token");
  });
});

Deno.test("speculative: verifications share steps with plain decodes and prompt chunks", () => {
  const { prompt } = tinyCopy();
  const long = byName("raw_random600").tokens;
  const fox = byName("text_fox").tokens;
  const path = fixture("qwen3-tiny-q8_0.gguf");
  const alone = withEngine(path, (engine) => [
    ids(generate(engine, request("a", prompt, 40, OFF))),
    ids(generate(engine, request("b", fox, 40, OFF))),
    ids(generate(engine, request("c", long, 8, OFF))),
  ]);
  withEngine(path, (engine) => {
    const a = submit(engine, request("a", prompt, 40, FORCED));
    const b = submit(engine, request("b", fox, 40, OFF));
    while (a.tokens.length < 2 || b.tokens.length < 2) engine.step();
    const c = submit(engine, request("c", long, 8, FORCED));
    // A step stopped for an arrival throws its drafts away with the rest of its work.
    const word = new Int32Array(1);
    word[0] = 1;
    engine.step({ word, seen: 0 });
    assertEquals(engine.stats().interruptedSteps, 1);
    let mixed = 0;
    while (engine.hasWork) {
      const before = engine.stats();
      engine.step();
      const d = delta(engine.stats(), before);
      if (d.specVerifications > 0 && d.prefillTokens > 0 && d.decodeTokens > 1) mixed++;
    }
    assert(mixed > 0, "no step carried a verification, a plain decode and a prompt chunk");
    assertEquals([ids(a), ids(b), ids(c)], alone);
    assertEquals(engine.stats().kvBlocksUsed, 0);
  });
});
