/**
 * Every fixture golden end to end on the GPU: through the model on the CUDA backend (every
 * prompt: argmax at each position, top-20 logits, 32 greedy steps with device argmax and
 * graph replay; f16 and f32 KV caches), and through the engine Worker with device "cuda"
 * (chat template, tokenizer, scheduler, batching).
 */

import { assertEquals } from "../support/assert.ts";
import { EMULATED, gpuTest, HAS_GPU } from "./support.ts";
import { checkGolden } from "./checks/golden.ts";
import { FIXTURES, type GoldenPrompt, MODEL_FIXTURES, modelGolden } from "../fixtures.ts";
import { GREEDY } from "../../src/engine/mod.ts";
import type { GenerateRequest, Prompt } from "../../src/frontend/mod.ts";
import { ModelHost } from "../../src/harness/native/model_host.ts";

function present(name: string): boolean {
  try {
    Deno.statSync(`${FIXTURES}/${name}.gguf`);
    Deno.statSync(`${FIXTURES}/golden/${name}.json`);
    return true;
  } catch {
    return false;
  }
}

const available = MODEL_FIXTURES.filter(present);
const missing = MODEL_FIXTURES.filter((m) => !present(m));
if (HAS_GPU && missing.length > 0) {
  console.warn(
    `NOTICE test:gpu: fixtures not found in ${FIXTURES}, skipped: ${missing.join(", ")}`,
  );
}

/** NEURON_TEST_QUICK=1: one prompt and three greedy steps per model (emulated dry runs). */
const quick = Deno.env.get("NEURON_TEST_QUICK") === "1"
  ? { prompts: ["raw_random16"], greedySteps: 3 }
  : {};

for (const name of available) {
  gpuTest(`${name}: every golden prompt (positions, top-20, greedy) on the GPU`, (be) => {
    const r = checkGolden(be, name, quick);
    console.log(
      `${name}: ${r.prompts} prompts, worst logit difference ${
        r.worstLogitDiff.toFixed(4)
      } (tolerance ${r.tolerance})`,
    );
  });
}

if (available.includes("qwen3-tiny-q4_0")) {
  gpuTest("qwen3-tiny-q4_0 with an f32 KV cache and without cuBLAS", (be) => {
    checkGolden(be, "qwen3-tiny-q4_0", { ...quick, kvDtype: "f32" });
  }, { cublas: false });
}

function promptOf(p: GoldenPrompt): Prompt {
  if (p.messages) {
    return {
      kind: "messages",
      messages: p.messages as never,
      tools: p.tools as never,
      templateKwargs: p.chat_template_kwargs,
    };
  }
  return { kind: "tokens", ids: p.tokens };
}

async function generate(host: ModelHost, req: GenerateRequest): Promise<number[]> {
  const ids: number[] = [];
  for await (const ev of await host.generate(req)) {
    if (ev.type === "delta") ids.push(...ev.tokens.map((t) => t.id));
    if (ev.type === "done" && ev.fault) throw new Error(`${ev.fault.code}: ${ev.fault.message}`);
  }
  return ids;
}

// The engine creates its backend from the device name, with the default libraries.
const engineModel = (["qwen3-small-q4_k_m", "qwen3-tiny-q8_0"] as const).find((m) =>
  available.includes(m)
);
Deno.test({
  name: "gpu: engine Worker with device cuda reproduces golden greedy continuations, batched",
  ignore: !HAS_GPU || EMULATED || engineModel === undefined,
  async fn() {
    const name = engineModel!;
    const host = await ModelHost.start({
      modelPath: `${FIXTURES}/${name}.gguf`,
      device: "cuda",
      threads: 1,
      contextLength: 2048,
      maxSequences: 8,
      maxBatchTokens: 256,
      kvDtype: "f16",
    });
    try {
      const golden = modelGolden(name);
      const names = ["chat_system", "raw_hello", "chat_tools", "text_code", "raw_random600"];
      const prompts = names.map((n) => golden.prompts.find((p) => p.name === n)!);
      const results = await Promise.all(
        prompts.map((p, i) =>
          generate(host, {
            id: `g${i}`,
            prompt: promptOf(p),
            maxTokens: 32,
            sampling: GREEDY,
            ignoreEos: true,
          })
        ),
      );
      results.forEach((ids, i) => assertEquals(ids, prompts[i].greedy.map((g) => g.id), names[i]));
    } finally {
      await host.close();
    }
  },
});
