/**
 * A Qwen3-0.6B-shaped Q8_0 model (the real shapes and types, so a step costs what the real
 * model's does) whose greedy continuation is known: as in the fixtures (their README), every
 * token t has a designed successor s(t), a random permutation. The output row of s(t) is the
 * embedding row of t, byte for byte, and every sublayer's output projection is scaled down,
 * so the last token's embedding dominates the final hidden state and s(t) wins by a wide
 * margin. A prompt holding a stretch of the chain t, s(t), s(s(t)), ... is then continued
 * by copying that stretch, which is what prompt lookup drafts.
 */

import { byteLevelVocab, Rng, writeGguf } from "../../src/gguf/mod.ts";
import type { GgufTensorSpec } from "../../src/gguf/mod.ts";
import {
  QWEN3_SHAPES,
  type Qwen3Hparams,
  qwen3ModelKv,
  qwen3TensorPlan,
  randomTensor,
} from "../../src/models/qwen3_synthetic.ts";
import { cacheDir } from "../../src/bench/synthetic.ts";

const SEED = 23;
/** Sublayer outputs this much smaller than random: the embedding stays on top. */
const SUBLAYER_SCALE = 1e-3;
const BENCH_SHAPE = { ...QWEN3_SHAPES["qwen3-0.6b"], tiedOutput: false };
const DRAFT_SHAPE: Qwen3Hparams = {
  hidden: 256,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  ffn: 512,
  vocab: BENCH_SHAPE.vocab,
  tiedOutput: false,
};

export interface CopyingModel {
  path: string;
  /** successor[t] = s(t). */
  successor: Int32Array;
}

/**
 * The designed successor permutation (Fisher-Yates from the seed); with `agree` < 1, a
 * share 1 - agree of the tokens swap successors in pairs, so a model of it agrees with one
 * of the full permutation on that share of tokens (a draft model of known quality).
 */
function successors(vocab: number, agree = 1): Int32Array {
  const rng = new Rng(SEED);
  const s = Int32Array.from({ length: vocab }, (_, i) => i);
  for (let i = vocab - 1; i > 0; i--) {
    const j = rng.u32() % (i + 1);
    [s[i], s[j]] = [s[j], s[i]];
  }
  const swaps = new Rng(SEED + 2);
  for (let t = 0; t + 1 < vocab; t += 2) {
    if (swaps.float() < 1 - agree) [s[t], s[t + 1]] = [s[t + 1], s[t]];
  }
  return s;
}

/** The Qwen3-0.6B-shaped model, written once into the synthetic model cache. */
export function copyingModel(): CopyingModel {
  return cached("qwen3-0.6b-copying-q8_0.gguf", BENCH_SHAPE, 1);
}

/**
 * A small draft model for the 0.6B one (hidden 256, 2 layers, the same vocabulary) that
 * continues as it does on a share `agree` of tokens, written once into the cache.
 */
export function copyingDraft(agree: number): CopyingModel {
  return cached(`qwen3-draft-agree${Math.round(agree * 100)}-q8_0.gguf`, DRAFT_SHAPE, agree);
}

function cached(name: string, hp: Qwen3Hparams, agree: number): CopyingModel {
  const path = `${cacheDir()}/synthetic/${name}`;
  try {
    Deno.statSync(path);
    return { path, successor: successors(hp.vocab, agree) };
  } catch {
    // Not written yet.
  }
  Deno.mkdirSync(`${cacheDir()}/synthetic`, { recursive: true });
  return writeCopyingModel(path, hp, agree);
}

/** Writes a copying model of shape `hp` (untied output, Q8_0) to `path`. */
export function writeCopyingModel(path: string, hp: Qwen3Hparams, agree = 1): CopyingModel {
  const HP = { ...hp, tiedOutput: false };
  const successor = successors(HP.vocab, agree);
  const plan = qwen3TensorPlan(HP, "q8_0").map((t) =>
    /attn_output|ffn_down/.test(t.name) ? { ...t, rms: t.rms * SUBLAYER_SCALE } : t
  );
  const embd = plan.find((t) => t.name === "token_embd.weight")!;
  const out = plan.find((t) => t.name === "output.weight")!;
  if (embd.type !== out.type) throw new Error("the embedding and output types must match");
  const rowBytes = (HP.hidden / embd.type.blockSize) * embd.type.typeSize;
  const embedding = new Uint8Array(rowBytes * HP.vocab);
  let at = 0;
  const fill = randomTensor(embd, new Rng(SEED + 1)) as (write: (b: Uint8Array) => void) => void;
  fill((chunk) => {
    embedding.set(chunk, at);
    at += chunk.length;
  });
  const output = new Uint8Array(embedding.length);
  for (let t = 0; t < HP.vocab; t++) {
    output.set(embedding.subarray(t * rowBytes, (t + 1) * rowBytes), successor[t] * rowBytes);
  }
  const tensors = plan.map((t, i): GgufTensorSpec => ({
    name: t.name,
    type: t.type,
    ne: t.ne,
    data: t === embd
      ? embedding
      : t === out
      ? output
      : randomTensor(t, new Rng((Math.imul(SEED, 0x9e3779b1) + i) >>> 0)),
  }));
  const name = "Qwen3 synthetic copying q8_0";
  writeGguf(path, {
    kv: [...qwen3ModelKv(HP, "q8_0", name), ...byteLevelVocab(HP.vocab)],
    tensors,
  });
  return { path, successor };
}
