/**
 * Structured outputs through a node, on the random-weight fixture (which on its own never
 * writes JSON): 200 chat requests over 50 varied schemas (schemas.ts), each at temperature
 * 0 and at temperature 1 with three seeds, four at a time so that constrained sequences
 * share decode steps (and a schema's requests its compiled grammar); 51 GBNF grammars
 * through completions, every output checked by llama.cpp's own grammar sampler; JSON mode;
 * forced tool calls (`required`, a named function, parallel or not) whose arguments match
 * their tool's schema. Whatever finishes with "stop" must parse and validate (ajv, with
 * its formats); nearly all must finish so.
 */

import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { fixture } from "../fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { openLlamaModel } from "../support/llama_ref.ts";
import { type TestNode, withNode } from "../support/node.ts";
import { loadFixture, nativeNode } from "../native/support.ts";
import { GRAMMARS } from "./gbnf_grammars.ts";
import { SchemaMaker } from "./schemas.ts";

const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats.default(ajv);

const MESSAGES = [{ role: "user", content: "Answer in JSON." }];

interface Choice {
  finish_reason: string;
  message: {
    content: string | null;
    tool_calls?: Array<{ function: { name: string; arguments: string } }>;
  };
}

async function chat(node: TestNode, body: Record<string, unknown>): Promise<Choice> {
  const res = await node.post("/v1/chat/completions", { messages: MESSAGES, ...body });
  const json = await res.json();
  assertEquals(res.status, 200, JSON.stringify(json));
  return json.choices[0];
}

/** Runs `jobs` `width` at a time. */
async function inParallel<T>(jobs: Array<() => Promise<T>>, width: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await jobs[i]();
    }
  }));
  return out;
}

Deno.test("structured outputs: schemas, JSON mode, grammars and forced tool calls", async (t) => {
  await withNode(nativeNode({ maxInFlight: 4, contextLength: 2048 }), async (node) => {
    const model = await loadFixture(node, "qwen3-tiny-q8_0.gguf");

    await t.step("200 requests with varied schemas validate when they stop", async () => {
      const maker = new SchemaMaker(2021, { open: false });
      const schemas = Array.from({ length: 50 }, () => maker.document());
      const runs = [
        { temperature: 0, seed: 0 },
        ...[1, 2, 3].map((seed) => ({ temperature: 1, seed })),
      ];
      const jobs = schemas.flatMap((schema, i) =>
        runs.map(({ temperature, seed }) => async () => {
          const choice = await chat(node, {
            model,
            temperature,
            seed,
            max_tokens: 400,
            response_format: {
              type: "json_schema",
              json_schema: { name: `s${i}`, schema, strict: true },
            },
          });
          if (choice.finish_reason !== "stop") return { stopped: false };
          const text = choice.message.content ?? "";
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch {
            throw new Error(`schema ${i}: not JSON: ${text}`);
          }
          const ok = ajv.validate(schema, value);
          assert(ok, `schema ${i} (t=${temperature}): ${JSON.stringify(ajv.errors)}\n${text}`);
          return { stopped: true };
        })
      );
      const results = await inParallel(jobs, 4);
      assertEquals(results.length, 200);
      const stopped = results.filter((r) => r.stopped).length;
      assert(stopped >= 190, `only ${stopped} of 200 finished with stop`);
    });

    await t.step("JSON mode gives a JSON object", async () => {
      for (const temperature of [0, 1]) {
        const choice = await chat(node, {
          model,
          temperature,
          max_tokens: 300,
          response_format: { type: "json_object" },
        });
        if (choice.finish_reason !== "stop") continue;
        const value = JSON.parse(choice.message.content ?? "");
        assert(value !== null && typeof value === "object" && !Array.isArray(value));
      }
    });

    await t.step("51 GBNF grammars: outputs llama.cpp's grammar accepts", async () => {
      using ref = await openLlamaModel(fixture("qwen3-vocab.gguf"), { vocabOnly: true });
      let stopped = 0;
      for (const [i, grammar] of GRAMMARS.entries()) {
        const res = await node.post("/v1/completions", {
          model,
          prompt: "Write:",
          temperature: i % 2,
          seed: i,
          max_tokens: 200,
          grammar,
        });
        const json = await res.json();
        assertEquals(res.status, 200, JSON.stringify(json));
        const { text, finish_reason } = json.choices[0];
        if (finish_reason !== "stop") continue;
        stopped++;
        using g = ref.grammar(grammar)!;
        const ids = ref.tokenize(text, { special: false, addSpecial: false });
        for (const id of ids) {
          assert(g.allowed([id])[0], `${grammar}: llama.cpp refuses ${JSON.stringify(text)}`);
          g.accept(id);
        }
        assert(g.mayEnd(), `${grammar}: llama.cpp finds ${JSON.stringify(text)} incomplete`);
      }
      assert(stopped >= 40, `only ${stopped} of ${GRAMMARS.length} grammars finished with stop`);
    });

    await t.step("forced tool calls match their tool's parameters", async () => {
      const tools = [
        {
          type: "function",
          function: {
            name: "get_weather",
            parameters: {
              type: "object",
              properties: {
                city: { enum: ["Paris", "Zürich", "東京"] },
                days: { type: "integer", minimum: 1, maximum: 7 },
              },
              required: ["city", "days"],
              additionalProperties: false,
            },
          },
        },
        {
          type: "function",
          function: {
            name: "search",
            parameters: {
              type: "object",
              properties: { q: { type: "string", maxLength: 12 } },
              required: ["q"],
            },
          },
        },
      ];
      const cases = [
        { tool_choice: "required" },
        { tool_choice: "required", parallel_tool_calls: false },
        { tool_choice: { type: "function", function: { name: "search" } } },
      ];
      for (const [i, extra] of cases.entries()) {
        for (const temperature of [0, 1]) {
          const choice = await chat(node, {
            model,
            temperature,
            seed: i,
            max_tokens: 300,
            tools,
            ...extra,
          });
          assertEquals(choice.finish_reason, "tool_calls", JSON.stringify(choice));
          const calls = choice.message.tool_calls ?? [];
          assert(calls.length >= 1, JSON.stringify(choice));
          if (extra.parallel_tool_calls === false || typeof extra.tool_choice === "object") {
            assertEquals(calls.length, 1);
          }
          for (const call of calls) {
            const tool = tools.find((x) => x.function.name === call.function.name);
            assert(tool !== undefined, `unknown tool ${call.function.name}`);
            if (typeof extra.tool_choice === "object") assertEquals(call.function.name, "search");
            const args = JSON.parse(call.function.arguments);
            assert(
              ajv.validate(tool.function.parameters, args),
              `${call.function.arguments}: ${JSON.stringify(ajv.errors)}`,
            );
          }
        }
      }
    });
  });
});
