/**
 * Speculative decoding over the API: the `speculative` extension field on chat and
 * completions (validated: 400 naming the field), a model's default from its load body,
 * overridden per request, output identical with or without it, and its counters on
 * /metrics and /health.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { eventually, jsonOf, type TestNode, withNode } from "../support/node.ts";
import { parsePrometheus } from "../support/prometheus.ts";
import { fixture, modelGolden } from "../fixtures.ts";
import { errorMessage } from "../../src/common/errors.ts";
import { nativeNode, v1 } from "./support.ts";

type Json = Record<string, unknown>;

const golden = modelGolden("qwen3-tiny-q8_0").prompts.find((p) => p.name === "raw_hello")!;
/** A prompt the tiny model's greedy continuation copies (its designed successors). */
const COPY = [...golden.tokens, ...golden.greedy.map((g) => g.id), ...golden.tokens];

/** The text of a greedy 32-token completion of `prompt` (a 200 asserted). */
async function complete(
  node: TestNode,
  model: string,
  prompt: number[],
  extra: Json,
): Promise<string> {
  const res = await v1(node, "completions", {
    model,
    prompt,
    max_tokens: 32,
    temperature: 0,
    ...extra,
  });
  const body = await jsonOf(res) as { choices: Array<{ text: string }> };
  assertEquals(res.status, 200, JSON.stringify(body));
  return body.choices[0].text;
}

/** A speculation counter of `model` on /metrics (0 before its first sample). */
async function specCounter(node: TestNode, model: string, name: string): Promise<number> {
  const families = parsePrometheus(await (await node.get("/metrics")).text());
  return families.get(name)?.samples.find((s) => s.labels.model === model)?.value ?? 0;
}

Deno.test("speculative API: a model default, per-request override, same output, counted", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = fixture("qwen3-tiny-q8_0.gguf");
    const load = await node.post("/models/load", {
      model_id: model,
      harness: "native",
      speculative: { mode: "ngram", k: 4 },
    });
    assertEquals(load.status, 200, await load.text());
    const copy = (extra: Json): Promise<string> => complete(node, model, COPY, extra);
    const plain = await copy({ speculative: { mode: "off" } });
    assertEquals(plain, golden.greedy_text, "the continuation copies the prompt");
    const counters = async (): Promise<Record<string, number>> => ({
      drafted: await specCounter(node, model, "neuron_model_spec_drafted_tokens_total"),
      accepted: await specCounter(node, model, "neuron_model_spec_accepted_tokens_total"),
      verifications: await specCounter(node, model, "neuron_model_spec_verifications_total"),
    });
    assertEquals((await counters()).drafted, 0, "off drafts nothing");

    assertEquals(await copy({}), plain, "the model's default: ngram");
    assertEquals(await copy({ speculative: { k: 2, n: 3 } }), plain, "k and n overridden");
    const chat = await v1(node, "chat/completions", {
      model,
      messages: [{ role: "user", content: "Say hello" }],
      max_tokens: 4,
      speculative: { mode: "ngram", k: 8, n: 4 },
    });
    assertEquals(chat.status, 200, await chat.text());

    const seen = await eventually(
      async () => {
        const c = await counters();
        return c.accepted > 0 ? c : undefined;
      },
      5000,
      "speculative counters",
    );
    assert(seen.drafted >= seen.accepted && seen.verifications > 0, JSON.stringify(seen));
    const health = await jsonOf(await node.get("/health")) as Json;
    const text = JSON.stringify(health);
    assert(/"spec_acceptance_rate":(0\.\d+|1)/.test(text), text);
    assert(/"spec_tokens_per_verification":[1-9]/.test(text), text);
  });
});

Deno.test("speculative API: bad values are 400 naming the field; draft mode needs a draft model", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = fixture("qwen3-tiny-q8_0.gguf");
    const load = await node.post("/models/load", { model_id: model, harness: "native" });
    assertEquals(load.status, 200, await load.text());
    const messages = [{ role: "user", content: "Hi" }];
    const cases: Array<[string, unknown, string, string]> = [
      ["mode", { mode: "fast" }, "invalid_request_body", "speculative.mode"],
      ["k too large", { k: 17 }, "invalid_request_body", "speculative.k"],
      ["k not an integer", { k: 2.5 }, "invalid_request_body", "speculative.k"],
      ["n zero", { n: 0 }, "invalid_request_body", "speculative.n"],
      ["unknown key", { depth: 3 }, "invalid_request_body", "speculative"],
      ["not an object", "ngram", "invalid_request_body", "speculative"],
      ["draft", { mode: "draft" }, "invalid_request", ""],
    ];
    for (const route of ["chat/completions", "completions"]) {
      for (const [name, speculative, code, param] of cases) {
        const body = route === "completions"
          ? { model, prompt: "Hi", max_tokens: 2, speculative }
          : { model, messages, max_tokens: 2, speculative };
        const res = await v1(node, route, body);
        const err = (await jsonOf(res) as { error: Json }).error;
        assertEquals([res.status, err.code], [400, code], `${route} ${name}`);
        assertEquals(err.type, "invalid_request_error", `${route} ${name}`);
        if (param) assertEquals(err.param, param, `${route} ${name}`);
        else assert(String(err.message).includes("draft model"), String(err.message));
      }
    }
    const bad = await node.post("/models/load", {
      model_id: fixture("qwen3-tiny-q4_0.gguf"),
      harness: "native",
      speculative: { mode: "ngram", k: 99 },
    });
    const refused = await jsonOf(bad) as Json;
    assertEquals(
      [bad.status, refused.code],
      [422, "invalid_request_body"],
      "an out-of-range load body is 422, as any malformed one",
    );
    const noDraft = await node.post("/models/load", {
      model_id: fixture("qwen3-tiny-q4_0.gguf"),
      harness: "native",
      speculative: { mode: "draft" },
    });
    const why = await jsonOf(noDraft) as Json;
    assertEquals([noDraft.status, why.code], [422, "invalid_request_body"]);
    assert(String(why.error).includes("draft needs a draft_model"), String(why.error));
  });
});

Deno.test("speculative API: a draft_model loaded beside the model drafts in mode draft", async () => {
  await withNode(nativeNode(), async (node) => {
    const model = fixture("qwen3-tiny-q8_0.gguf");
    const load = await node.post("/models/load", {
      model_id: model,
      harness: "native",
      draft_model: fixture("qwen3-tiny-q4_0.gguf"),
      speculative: { mode: "draft", k: 4 },
    });
    assertEquals(load.status, 200, await load.text());
    const hello = (extra: Json): Promise<string> => complete(node, model, golden.tokens, extra);
    assertEquals(await hello({ speculative: { mode: "off" } }), golden.greedy_text);
    assertEquals(await hello({}), golden.greedy_text, "the model's default: draft");
    // The counters reach /metrics by polling the engine: a poll taken during the request can
    // show part of its drafts until the one taken as it ends arrives.
    let accepted = 0;
    await eventually(
      async () => {
        accepted = await specCounter(node, model, "neuron_model_spec_accepted_tokens_total");
        return accepted >= 16 ? accepted : undefined;
      },
      5000,
      "at least 16 accepted drafts",
    ).catch((err) => {
      throw new Error(`${errorMessage(err)}: ${accepted} accepted`);
    });
    const missing = await node.post("/models/load", {
      model_id: fixture("qwen3-tiny-f16.gguf"),
      harness: "native",
      draft_model: "/nonexistent/draft.gguf",
    });
    const err = await jsonOf(missing) as Json;
    assert(missing.status >= 400 && missing.status < 500, `${missing.status} ${err.code}`);
  });
});
