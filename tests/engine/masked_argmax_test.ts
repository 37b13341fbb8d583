/**
 * Constrained greedy decoding takes the runner's native argmax with each sequence's token
 * mask (its filter's `allowed` bitset), and picks exactly the tokens the logits path picks
 * (logits read back, `restrict`, argmax in TypeScript): JSON schemas, a GBNF grammar and
 * JSON mode on a thinking prompt (whose first token may open the reasoning block), on the
 * random-weight fixture with the real Qwen3 vocabulary. A batch mixing constrained and
 * free greedy sequences runs every step through forwardArgmax.
 */

import { assert, assertEquals, assertNotEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import { Engine, type EngineRequest, GREEDY, type TokenFilter } from "../../src/engine/mod.ts";
import type { OutputConstraint } from "../../src/constrain/mod.ts";
import { FrontEnd } from "../../src/frontend/front_end.ts";
import { openGguf } from "../../src/gguf/mod.ts";
import { type ModelRunner, openModel, openRunner } from "../../src/runner/mod.ts";
import { ids, submit } from "./spec_support.ts";

const PATH = fixture("qwen3-tiny-q8_0.gguf");
const frontEnd = FrontEnd.fromGguf(openGguf(PATH));
const MAX_TOKENS = 24;

const SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 6 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    tags: { type: "array", items: { enum: ["a", "bc", "déf"] }, maxItems: 3 },
    ok: { type: "boolean" },
  },
  required: ["name", "age", "tags", "ok"],
  additionalProperties: false,
};
const GBNF = String.raw`root ::= ("yes" | "no" | [a-z]{2,6}) " " [0-9]{1,4} "."`;

async function prepare(
  id: string,
  content: string,
  constraint: OutputConstraint | undefined,
  thinking = false,
): Promise<EngineRequest> {
  const prepared = await frontEnd.prepare({
    id,
    prompt: {
      kind: "messages",
      messages: [{ role: "user", content }],
      templateKwargs: { enable_thinking: thinking },
    },
    sampling: GREEDY,
    maxTokens: MAX_TOKENS,
    parseOutput: true,
    ...(constraint ? { constraint } : {}),
  }, () => {});
  return prepared.request;
}

/** The filter without `allowed`: its sequence's logits are read back every step. */
function logitsOnly(filter: TokenFilter): TokenFilter {
  return {
    restrict: (logits, from) => filter.restrict(logits, from),
    accept: (id) => filter.accept(id),
  };
}

interface Calls {
  forward: number;
  argmax: number;
  /** forwardArgmax steps with masks, and with masked and unmasked rows both. */
  masked: number;
  mixed: number;
}

function spy(r: ModelRunner, calls: Calls): ModelRunner {
  return {
    shape: r.shape,
    device: r.device,
    kvBytes: r.kvBytes,
    forward: ((step, interrupt) => {
      calls.forward++;
      return r.forward(step, interrupt);
    }) as ModelRunner["forward"],
    forwardArgmax: (step, interrupt, masks) => {
      calls.argmax++;
      if (masks !== undefined) {
        calls.masked++;
        if (masks.some((m) => m === null) && masks.some((m) => m !== null)) calls.mixed++;
      }
      return r.forwardArgmax(step, interrupt, masks);
    },
    deviceBytes: () => r.deviceBytes(),
    close: () => r.close(),
  };
}

/** Runs `requests` together in one engine to their end; returns each one's token ids. */
function runAll(requests: EngineRequest[], calls: Calls): { ids: number[][]; finish: string[] } {
  const model = openModel(PATH);
  const kv = { blockSize: 16, nBlocks: 128, dtype: "f16" as const };
  const runner = openRunner(model, { device: "cpu", threads: 1 }, kv);
  try {
    const engine = new Engine(spy(runner, calls), {
      contextLength: 1024,
      maxSequences: 8,
      maxBatchTokens: 512,
      kv,
    });
    const outs = requests.map((r) => submit(engine, r));
    while (engine.hasWork) engine.step();
    return { ids: outs.map(ids), finish: outs.map((o) => o.finish) };
  } finally {
    runner.close();
    model.file.close();
  }
}

const noCalls = (): Calls => ({ forward: 0, argmax: 0, masked: 0, mixed: 0 });

Deno.test("masked argmax: constrained greedy picks what the logits path picks, batched with free greedy", async () => {
  const constrained: Array<[string, string, OutputConstraint, boolean]> = [
    ["schema", "Describe a person.", { text: { kind: "json", schema: SCHEMA } }, false],
    ["gbnf", "Answer.", { text: { kind: "grammar", gbnf: GBNF } }, false],
    ["json-thinking", "Any JSON object.", { text: { kind: "json" } }, true],
    ["schema-thinking", "Describe a person.", { text: { kind: "json", schema: SCHEMA } }, true],
  ];
  const free: Array<[string, string]> = [["free1", "Describe a person."], ["free2", "Hello!"]];

  // Each constrained request alone, through the logits path.
  const alone: number[][] = [];
  const aloneFinish: string[] = [];
  for (const [id, content, constraint, thinking] of constrained) {
    const req = await prepare(id, content, constraint, thinking);
    const calls = noCalls();
    const out = runAll([{ ...req, filter: logitsOnly(req.filter!) }], calls);
    assertEquals(calls.argmax, 0, `${id}: the logits path`);
    alone.push(out.ids[0]);
    aloneFinish.push(out.finish[0]);
  }
  const freeAlone = runAll(
    await Promise.all(free.map(([id, content]) => prepare(id, content, undefined))),
    noCalls(),
  );

  // All together, natively.
  const requests = [
    ...await Promise.all(constrained.map(([id, c, k, t]) => prepare(id, c, k, t))),
    ...await Promise.all(free.map(([id, content]) => prepare(id, content, undefined))),
  ];
  const calls = noCalls();
  const together = runAll(requests, calls);
  constrained.forEach(([id], i) => {
    assertEquals(together.ids[i], alone[i], id);
    assertEquals(together.finish[i], aloneFinish[i], id);
    assert(together.ids[i].length > 0, `${id} generated`);
  });
  free.forEach(([id], i) =>
    assertEquals(together.ids[constrained.length + i], freeAlone.ids[i], id)
  );
  assertEquals(calls.forward, 0, "no step read its logits back");
  assert(calls.masked > 0 && calls.mixed > 0, JSON.stringify(calls));
  // The masks decide: unconstrained, the same prompt continues otherwise.
  assertNotEquals(together.ids[0], freeAlone.ids[0]);
});

Deno.test("masked argmax: a grammar's native run ends complete, with the grammar's text", async () => {
  const req = await prepare("gbnf", "Answer.", { text: { kind: "grammar", gbnf: GBNF } });
  const calls = noCalls();
  const out = runAll([req], calls);
  assertEquals(calls.forward, 0);
  assertEquals(out.finish[0], "stop");
  const tok = frontEnd.tokenizer;
  const text = tok.decode(out.ids[0].filter((id) => !tok.eogIds.has(id)));
  assert(/^[a-z]{2,6} [0-9]{1,4}\.$/.test(text), JSON.stringify(text));
});
