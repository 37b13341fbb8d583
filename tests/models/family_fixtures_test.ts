/**
 * The family fixtures, checked by llama.cpp itself: it loads every file with the
 * architecture, vocabulary and chat template it was written with; every greedy step on
 * every family prompt wins by a wide margin (so quantization noise can never flip a
 * choice); and each sublayer, bias, rope feature and attention mask moves the top-20
 * logits by more than any tolerance, so an engine that drops or garbles one cannot pass.
 */

import { assert, assertEquals } from "../support/assert.ts";
import { type LlamaModel, openLlamaModel, topLogits } from "../support/llama_ref.ts";
import { FAMILIES, type Family, familyFixture, FIXTURE_QUANTS } from "../fixtures.ts";
import { type TensorSlot, TINY_SHAPES, writeFamilyModel } from "../fixtures/families/mod.ts";
import { type GgufKv, Kv, openGguf } from "../../src/gguf/mod.ts";
import { familyPrompts, promptText } from "./family_prompts.ts";

const CONTEXT = 1024;
const STEPS = 32;
const MIN_MARGIN = 5;
/** Above every tolerance the fixtures are compared with (f16 0.05, q8_0 0.75, q4_k_m 0.40). */
const MIN_EFFECT = 1;

const ARCH: Record<Family, string> = {
  llama3: "llama",
  mistral: "llama",
  qwen2: "qwen2",
  gemma3: "gemma3",
};

interface Rendered {
  name: string;
  ids: number[];
}

function renderAll(family: Family, path: string, model: LlamaModel): Rendered[] {
  const file = openGguf(path);
  try {
    return familyPrompts(family).map((p) => {
      const { text, addSpecial } = promptText(file, p);
      return { name: p.name, ids: model.tokenize(text, { special: true, addSpecial }) };
    });
  } finally {
    file.close();
  }
}

type Edit = {
  tensor?: (slot: TensorSlot, values: Float32Array) => Float32Array;
  kv?: (kv: Map<string, GgufKv>) => void;
  /** Only prompts longer than this many tokens can show it. */
  minTokens?: number;
};

const zeroed = (pick: (slot: TensorSlot) => boolean) => (slot: TensorSlot, v: Float32Array) =>
  pick(slot) ? new Float32Array(v.length) : v;

/** What an engine could get wrong, as a llama.cpp-readable variant of the f16 fixture. */
function variants(family: Family): Record<string, Edit> {
  const out: Record<string, Edit> = {
    "every attention output": { tensor: zeroed((s) => s.kind === "o") },
    "every FFN output": { tensor: zeroed((s) => s.kind === "down") },
  };
  if (family === "qwen2") out["q/k/v biases"] = { tensor: zeroed((s) => s.kind.endsWith("_bias")) };
  if (family === "llama3") {
    out["rope_freqs (Llama 3.1 rope scaling)"] = {
      tensor: (s, v) => s.kind === "rope_freqs" ? new Float32Array(v.length).fill(1) : v,
    };
  }
  if (family === "gemma3") {
    const window = TINY_SHAPES.gemma3.slidingWindow!;
    out["sliding-window mask"] = {
      kv: (kv) => kv.set("gemma3.attention.sliding_window", Kv.u32(CONTEXT)),
      minTokens: window,
    };
  }
  return out;
}

for (const family of FAMILIES) {
  Deno.test(`${family} fixtures: llama.cpp loads them and every greedy margin is >= ${MIN_MARGIN}`, async (t) => {
    for (const quant of FIXTURE_QUANTS) {
      const path = await familyFixture(family, quant);
      await t.step(quant, async () => {
        using model = await openLlamaModel(path, { contextLength: CONTEXT });
        assertEquals(model.meta("general.architecture"), ARCH[family]);
        assert(model.meta("tokenizer.chat_template") !== undefined, "chat template");
        assertEquals(model.nEmbd, TINY_SHAPES[family].hidden);
        let worst = { margin: Infinity, where: "" };
        for (const p of renderAll(family, path, model)) {
          model.greedy(p.ids, STEPS).forEach((s, k) => {
            if (s.margin < worst.margin) worst = { margin: s.margin, where: `${p.name} step ${k}` };
          });
        }
        assert(worst.margin >= MIN_MARGIN, `margin ${worst.margin} at ${worst.where}`);
      });
    }
  });

  Deno.test(`${family} fixture: each sublayer moves the top-20 logits beyond the tolerances`, async (t) => {
    const base = await familyFixture(family, "f16");
    const dir = await Deno.makeTempDir();
    try {
      const reference = await openLlamaModel(base, { contextLength: CONTEXT });
      const prompts = renderAll(family, base, reference);
      const expected = prompts.map((p) => topLogits(reference.logits(p.ids), 20));
      reference.close();
      for (const [what, edit] of Object.entries(variants(family))) {
        await t.step(what, async () => {
          const path = `${dir}/variant.gguf`;
          writeFamilyModel(path, {
            family,
            quant: "f16",
            editTensor: edit.tensor,
            editKv: edit.kv,
          });
          using variant = await openLlamaModel(path, { contextLength: CONTEXT });
          prompts.forEach((p, i) => {
            if (p.ids.length <= (edit.minTokens ?? 0)) return;
            const logits = variant.logits(p.ids);
            const moved = Math.max(...expected[i].map(([id, l]) => Math.abs(logits[id] - l)));
            assert(moved > MIN_EFFECT, `${p.name}: top-20 logits moved only ${moved}`);
          });
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
