/**
 * Gemma 3, per layer:
 *
 *   h   = x + post1(Wo · attn(rope(qnorm(Wq · n1)), rope(knorm(Wk · n1)), Wv · n1)),  n1 = rms(x)
 *   out = h + post2(Wdown · (gelu(Wgate · n2) * (Wup · n2))),                         n2 = rms(h)
 *
 * with x0 = embedding · sqrt(hidden), every norm (post1, post2 included) an RMS norm whose
 * weight the converter stored as 1 + w, NeoX rope, and a tied output. Five layers of every
 * six attend through a sliding window with their own rope base (10000 unless the file says);
 * the sixth sees the whole context, with the model's rope base and scaling.
 */

import type { Activation, AttentionShape, RopeSpec, Weight } from "../backend/backend.ts";
import type { GgufFile } from "../gguf/mod.ts";
import {
  type AttentionWeights,
  Decoder,
  decoderFamily,
  type FfnWeights,
  loadAttention,
  loadFfn,
  loadOuter,
  type StepActs,
} from "./decoder.ts";
import { ModelError } from "./errors.ts";
import type { ModelFamily } from "./family.ts";
import { ArchKeys, type DecoderHparams, readDecoderHparams } from "./hparams.ts";
import type { WeightLoader } from "./weights.ts";

const ARCH = "gemma3";

interface Gemma3Layer extends AttentionWeights, FfnWeights {
  attnNorm: Weight;
  qNorm: Weight;
  kNorm: Weight;
  postAttnNorm: Weight;
  ffnNorm: Weight;
  postFfnNorm: Weight;
}

/** What sets a layer's attention apart: local (windowed) or global. */
interface LayerAttention {
  rope: RopeSpec;
  shape: AttentionShape;
}

interface Gemma3Hparams extends DecoderHparams {
  /** Positions a local layer sees (0: every layer is global). */
  slidingWindow: number;
  /** Every `swaPeriod`-th layer is global, the others local. */
  swaPeriod: number;
  ropeBaseLocal: number;
}

function readGemma3Hparams(file: GgufFile): Gemma3Hparams {
  const hp = readDecoderHparams(file, ARCH);
  const keys = new ArchKeys(file, ARCH);
  const softcap = keys.numberOr("final_logit_softcapping", 0);
  if (softcap !== 0) {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("final_logit_softcapping")} = ${softcap}: logit soft-capping is not supported`,
    );
  }
  return {
    ...hp,
    slidingWindow: keys.numberOr("attention.sliding_window", 0) > 0
      ? keys.count("attention.sliding_window")
      : 0,
    swaPeriod: keys.countOr("attention.sliding_window_pattern", 6),
    ropeBaseLocal: keys.positiveOr("rope.freq_base_swa", 10000),
  };
}

/** The Gemma 3 family (registry.ts). */
export const GEMMA3: ModelFamily = decoderFamily(
  ARCH,
  readGemma3Hparams,
  (w, hp) => new Gemma3Model(w, hp),
);

class Gemma3Model extends Decoder<Gemma3Layer> {
  readonly #attention: LayerAttention[];

  constructor(w: WeightLoader, hp: Gemma3Hparams) {
    const { nEmbd, headDim } = hp;
    const layers = Array.from({ length: hp.nLayers }, (_, i): Gemma3Layer => ({
      attnNorm: w.weight(`blk.${i}.attn_norm.weight`, nEmbd),
      ...loadAttention(w, hp, i),
      qNorm: w.weight(`blk.${i}.attn_q_norm.weight`, headDim),
      kNorm: w.weight(`blk.${i}.attn_k_norm.weight`, headDim),
      postAttnNorm: w.weight(`blk.${i}.post_attention_norm.weight`, nEmbd),
      ffnNorm: w.weight(`blk.${i}.ffn_norm.weight`, nEmbd),
      ...loadFfn(w, hp, i),
      postFfnNorm: w.weight(`blk.${i}.post_ffw_norm.weight`, nEmbd),
    }));
    super(hp, w, loadOuter(w, hp), layers);
    // As llama.cpp: the 27B model (62 layers) scales by its hidden size per head.
    const scale = 1 / Math.sqrt(hp.nLayers === 62 ? nEmbd / hp.nHeads : headDim);
    const global: LayerAttention = {
      rope: this.modelRope("neox"),
      shape: this.attentionShape(scale),
    };
    const local: LayerAttention = {
      rope: { style: "neox", base: hp.ropeBaseLocal, freqScale: 1, freqFactors: null, yarn: null },
      shape: { ...this.attentionShape(scale), window: hp.slidingWindow },
    };
    const isLocal = (i: number): boolean =>
      hp.slidingWindow > 0 && i % hp.swaPeriod < hp.swaPeriod - 1;
    this.#attention = layers.map((_, i) => isLocal(i) ? local : global);
  }

  protected override embed(x: Activation, ids: Int32Array): void {
    super.embed(x, ids);
    this.backend.scale(x, x, Math.sqrt(this.hparams.nEmbd));
  }

  protected layer(l: Gemma3Layer, i: number, s: StepActs): void {
    const be = this.backend;
    const { nEmbd, headDim, rmsEps } = this.hparams;
    const { rope, shape } = this.#attention[i];
    be.rmsNorm(s.n, s.x, l.attnNorm, nEmbd, rmsEps);
    be.matmulMany([s.q, s.k, s.v], [l.wq, l.wk, l.wv], s.n);
    be.rmsNorm(s.q, s.q, l.qNorm, headDim, rmsEps);
    be.rmsNorm(s.k, s.k, l.kNorm, headDim, rmsEps);
    this.attend(s, l.wo, i, rope, shape);
    be.rmsNorm(s.proj, s.proj, l.postAttnNorm, nEmbd, rmsEps);
    be.add(s.x, s.x, s.proj);

    be.rmsNorm(s.n, s.x, l.ffnNorm, nEmbd, rmsEps);
    this.ffn(s, l, "gelu");
    be.rmsNorm(s.proj, s.proj, l.postFfnNorm, nEmbd, rmsEps);
    be.add(s.x, s.x, s.proj);
  }
}
