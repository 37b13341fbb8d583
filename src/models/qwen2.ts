/**
 * Qwen2 and Qwen2.5, per layer:
 *
 *   h   = x + Wo · attn(rope(Wq · n1 + bq), rope(Wk · n1 + bk), Wv · n1 + bv),  n1 = rms(x)
 *   out = h + Wdown · (silu(Wgate · n2) * (Wup · n2)),                        n2 = rms(h)
 *
 * Llama's layer with biases on the Q, K and V projections and a NeoX rope.
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

interface Qwen2Layer extends AttentionWeights, FfnWeights {
  attnNorm: Weight;
  bq: Weight;
  bk: Weight;
  bv: Weight;
  ffnNorm: Weight;
}

/** The Qwen2 family (registry.ts). */
export const QWEN2: ModelFamily = decoderFamily(
  "qwen2",
  readDecoderHparams,
  (w, hp) => new Qwen2Model(w, hp),
);

class Qwen2Model extends Decoder<Qwen2Layer> {
  readonly #rope: RopeSpec;

  constructor(w: WeightLoader, hp: DecoderHparams) {
    const kvDim = hp.nKvHeads * hp.headDim;
    const layers = Array.from({ length: hp.nLayers }, (_, i): Qwen2Layer => ({
      attnNorm: w.weight(`blk.${i}.attn_norm.weight`, hp.nEmbd),
      ...loadAttention(w, hp, i),
      bq: w.vector(`blk.${i}.attn_q.bias`, hp.nHeads * hp.headDim, w.byRows),
      bk: w.vector(`blk.${i}.attn_k.bias`, kvDim, w.byRows),
      bv: w.vector(`blk.${i}.attn_v.bias`, kvDim, w.byRows),
      ffnNorm: w.weight(`blk.${i}.ffn_norm.weight`, hp.nEmbd),
      ...loadFfn(w, hp, i),
    }));
    super(hp, w, loadOuter(w, hp), layers);
    this.#rope = this.modelRope("neox");
  }

  protected layer(l: Qwen2Layer, i: number, s: StepActs): void {
    const be = this.backend;
    const { nEmbd, rmsEps } = this.hparams;
    be.rmsNorm(s.n, s.x, l.attnNorm, nEmbd, rmsEps);
    be.matmulMany([s.q, s.k, s.v], [l.wq, l.wk, l.wv], s.n);
    be.addBias(s.q, s.q, l.bq);
    be.addBias(s.k, s.k, l.bk);
    be.addBias(s.v, s.v, l.bv);
    this.attend(s, l.wo, i, this.#rope, this.attentionShape());
    be.add(s.x, s.x, s.proj);

    be.rmsNorm(s.n, s.x, l.ffnNorm, nEmbd, rmsEps);
    this.ffn(s, l, "silu");
    be.add(s.x, s.x, s.proj);
  }
}
