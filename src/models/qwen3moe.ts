/**
 * Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B), per layer: Qwen3's attention, then
 * routed experts in place of the dense FFN (moe_ffn.ts):
 *
 *   h   = x + Wo · attn(rope(qnorm(Wq · n1)), rope(knorm(Wk · n1)), Wv · n1),  n1 = rms(x)
 *   out = h + Σ_j w_j · Wdown[e_j] · (silu(Wgate[e_j] · n2) * (Wup[e_j] · n2)), n2 = rms(h)
 *
 * with e_1..e_k the k experts the router scores highest for n2 and w their softmax
 * probabilities renormalised over the k (llama.cpp's qwen3moe: softmax gating, weights
 * normalised, no scale).
 */

import type { Activation, KvCache, RopeSpec, Step, Weight } from "../backend/backend.ts";
import {
  type AttentionWeights,
  Decoder,
  decoderFamily,
  loadAttention,
  loadOuter,
  type StepActs,
} from "./decoder.ts";
import type { ModelFamily } from "./family.ts";
import { loadMoe, MoeFfn, type MoeWeights } from "./moe_ffn.ts";
import { type MoeHparams, readMoeHparams } from "./moe_hparams.ts";
import type { WeightLoader } from "./weights.ts";

interface Qwen3MoeLayer extends AttentionWeights, MoeWeights {
  attnNorm: Weight;
  qNorm: Weight;
  kNorm: Weight;
  ffnNorm: Weight;
}

/** The Qwen3-MoE family (registry.ts). */
export const QWEN3MOE: ModelFamily = decoderFamily(
  "qwen3moe",
  readMoeHparams,
  (w, hp) => new Qwen3MoeModel(w, hp),
);

class Qwen3MoeModel extends Decoder<Qwen3MoeLayer> {
  readonly #rope: RopeSpec;
  readonly #moe: MoeFfn;

  constructor(w: WeightLoader, hp: MoeHparams) {
    const layers = Array.from({ length: hp.nLayers }, (_, i): Qwen3MoeLayer => ({
      attnNorm: w.weight(`blk.${i}.attn_norm.weight`, hp.nEmbd),
      ...loadAttention(w, hp, i),
      qNorm: w.weight(`blk.${i}.attn_q_norm.weight`, hp.headDim),
      kNorm: w.weight(`blk.${i}.attn_k_norm.weight`, hp.headDim),
      ffnNorm: w.weight(`blk.${i}.ffn_norm.weight`, hp.nEmbd),
      ...loadMoe(w, hp, i),
    }));
    super(hp, w, loadOuter(w, hp), layers);
    this.#rope = this.modelRope("neox");
    this.#moe = new MoeFfn(this.backend, hp, this.local.nFf);
  }

  override forward(step: Step, cache: KvCache): Activation {
    this.#moe.reserve(step.ids.length);
    return super.forward(step, cache);
  }

  protected layer(l: Qwen3MoeLayer, i: number, s: StepActs): void {
    const be = this.backend;
    const { nEmbd, headDim, rmsEps } = this.hparams;
    be.rmsNorm(s.n, s.x, l.attnNorm, nEmbd, rmsEps);
    be.matmulMany([s.q, s.k, s.v], [l.wq, l.wk, l.wv], s.n);
    be.rmsNorm(s.q, s.q, l.qNorm, headDim, rmsEps);
    be.rmsNorm(s.k, s.k, l.kNorm, headDim, rmsEps);
    this.attend(s, l.wo, i, this.#rope, this.attentionShape());
    be.add(s.x, s.x, s.proj);

    be.rmsNorm(s.n, s.x, l.ffnNorm, nEmbd, rmsEps);
    this.#moe.run(s.proj, s.n, l);
    this.sumOverRanks(s.proj);
    be.add(s.x, s.x, s.proj);
  }

  override close(): void {
    this.#moe.free();
    super.close();
  }
}
