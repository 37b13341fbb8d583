/**
 * Qwen3, per layer:
 *
 *   h   = x + Wo · attn(rope(qnorm(Wq · n1)), rope(knorm(Wk · n1)), Wv · n1),  n1 = rms(x)
 *   out = h + Wdown · (silu(Wgate · n2) * (Wup · n2)),                          n2 = rms(h)
 *
 * Q and K are RMS-normalised per head before a NeoX rope (the Qwen3 change from Qwen2); the
 * output matrix is the token embedding when tied.
 */

import type { RopeSpec, Weight } from "../backend/backend.ts";
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
import type { ModelFamily } from "./family.ts";
import { type DecoderHparams, readDecoderHparams } from "./hparams.ts";
import type { WeightLoader } from "./weights.ts";

interface Qwen3Layer extends AttentionWeights, FfnWeights {
  attnNorm: Weight;
  qNorm: Weight;
  kNorm: Weight;
  ffnNorm: Weight;
}

/** The Qwen3 family (registry.ts). */
export const QWEN3: ModelFamily = decoderFamily(
  "qwen3",
  readDecoderHparams,
  (w, hp) => new Qwen3Model(w, hp),
);

class Qwen3Model extends Decoder<Qwen3Layer> {
  readonly #rope: RopeSpec;

  constructor(w: WeightLoader, hp: DecoderHparams) {
    const layers = Array.from({ length: hp.nLayers }, (_, i): Qwen3Layer => ({
      attnNorm: w.weight(`blk.${i}.attn_norm.weight`, hp.nEmbd),
      ...loadAttention(w, hp, i),
      qNorm: w.weight(`blk.${i}.attn_q_norm.weight`, hp.headDim),
      kNorm: w.weight(`blk.${i}.attn_k_norm.weight`, hp.headDim),
      ffnNorm: w.weight(`blk.${i}.ffn_norm.weight`, hp.nEmbd),
      ...loadFfn(w, hp, i),
    }));
    super(hp, w, loadOuter(w, hp), layers);
    this.#rope = this.modelRope("neox");
  }

  protected layer(l: Qwen3Layer, i: number, s: StepActs): void {
    const be = this.backend;
    const { nEmbd, headDim, rmsEps } = this.hparams;
    be.rmsNorm(s.n, s.x, l.attnNorm, nEmbd, rmsEps);
    be.matmulMany([s.q, s.k, s.v], [l.wq, l.wk, l.wv], s.n);
    be.rmsNorm(s.q, s.q, l.qNorm, headDim, rmsEps);
    be.rmsNorm(s.k, s.k, l.kNorm, headDim, rmsEps);
    this.attend(s, l.wo, i, this.#rope, this.attentionShape());
    be.add(s.x, s.x, s.proj);

    be.rmsNorm(s.n, s.x, l.ffnNorm, nEmbd, rmsEps);
    this.ffn(s, l, "silu");
    be.add(s.x, s.x, s.proj);
  }
}
