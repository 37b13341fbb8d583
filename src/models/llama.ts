/**
 * Llama (Llama 2 and 3, Mistral and the other files of GGUF architecture `llama`), per layer:
 *
 *   h   = x + Wo · attn(rope(Wq · n1), rope(Wk · n1), Wv · n1),  n1 = rms(x)
 *   out = h + Wdown · (silu(Wgate · n2) * (Wup · n2)),          n2 = rms(h)
 *
 * The rope pairs adjacent features (ggml's NORM layout: the converter permuted Wq and Wk
 * for it). Llama 3.1's rope scaling reaches the file as `rope_freqs.weight`, one divisor
 * per feature pair, applied to every layer's angles.
 */

import type { AttentionShape, RopeSpec, Weight } from "../backend/backend.ts";
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
import { ArchKeys, type DecoderHparams, readDecoderHparams } from "./hparams.ts";
import type { WeightLoader } from "./weights.ts";

interface LlamaLayer extends AttentionWeights, FfnWeights {
  attnNorm: Weight;
  ffnNorm: Weight;
}

/** The Llama family (registry.ts). */
export const LLAMA: ModelFamily = decoderFamily(
  "llama",
  readDecoderHparams,
  (w, hp) => new LlamaModel(w, hp),
);

class LlamaModel extends Decoder<LlamaLayer> {
  readonly #rope: RopeSpec;
  readonly #shape: AttentionShape;

  constructor(w: WeightLoader, hp: DecoderHparams) {
    const layers = Array.from({ length: hp.nLayers }, (_, i): LlamaLayer => ({
      attnNorm: w.weight(`blk.${i}.attn_norm.weight`, hp.nEmbd),
      ...loadAttention(w, hp, i),
      ffnNorm: w.weight(`blk.${i}.ffn_norm.weight`, hp.nEmbd),
      ...loadFfn(w, hp, i),
    }));
    super(hp, w, loadOuter(w, hp), layers);
    const factors = "rope_freqs.weight";
    this.#rope = this.modelRope("norm", w.has(factors) ? w.weight(factors, hp.headDim / 2) : null);
    // Some llama-architecture files (Granite) set their own softmax scale.
    const scale = new ArchKeys(w.file, "llama").numberOr("attention.scale", 0);
    this.#shape = this.attentionShape(scale > 0 ? scale : undefined);
  }

  protected layer(l: LlamaLayer, i: number, s: StepActs): void {
    const be = this.backend;
    const { nEmbd, rmsEps } = this.hparams;
    be.rmsNorm(s.n, s.x, l.attnNorm, nEmbd, rmsEps);
    be.matmulMany([s.q, s.k, s.v], [l.wq, l.wk, l.wv], s.n);
    this.attend(s, l.wo, i, this.#rope, this.#shape);
    be.add(s.x, s.x, s.proj);

    be.rmsNorm(s.n, s.x, l.ffnNorm, nEmbd, rmsEps);
    this.ffn(s, l, "silu");
    be.add(s.x, s.x, s.proj);
  }
}
