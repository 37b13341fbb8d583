/**
 * What every decoder family shares: token embeddings in, a stack of layers over a residual
 * stream x, then logits = Wout · rms(x) for the rows that need them. A family writes its
 * layer (`layer()`) from the sublayers here, so that its file reads like its math:
 *
 *   attend:  proj = Wo · attn(rope(q), rope(k), v)      (q, k, v already projected)
 *            a quantized cache holds K and V rotated: Hk·k, Hv·v; then q turns by Hk and
 *            the output back by Hv (kvRotation)
 *   ffn:     proj = Wdown · (act(Wgate · n) * (Wup · n))  act = silu or gelu
 *
 * Under tensor parallelism a rank holds some heads and FFN columns (shard.ts); Wo and Wdown
 * then give partial sums, added over the ranks inside both sublayers. A step may ask for
 * rms(x) itself instead of logits (`step.output` "hidden"): what embeddings are pooled from.
 */

import {
  type Activation,
  type AttentionShape,
  type Backend,
  type KvCache,
  kvRotation,
  type KvShape,
  type RopeSpec,
  type Step,
  type StepLayout,
  type Weight,
} from "../backend/backend.ts";
import type { GgufFile } from "../gguf/mod.ts";
import type { GgufModel, Model, ModelFamily, ModelShard } from "./family.ts";
import type { DecoderHparams } from "./hparams.ts";
import { readPooling } from "./pooling.ts";
import { ropeYarn } from "./rope_scaling.ts";
import { type ShardDims, shardDims } from "./shard.ts";
import { WeightLoader } from "./weights.ts";

/** The attention projections of a layer (this rank's heads). */
export interface AttentionWeights {
  wq: Weight;
  wk: Weight;
  wv: Weight;
  wo: Weight;
}

/** The gated FFN of a layer (this rank's columns). */
export interface FfnWeights {
  wGate: Weight;
  wUp: Weight;
  wDown: Weight;
}

/** The weights outside the layers. */
export interface DecoderWeights {
  tokenEmbd: Weight;
  outputNorm: Weight;
  /** The token embedding itself when the file ties them. */
  output: Weight;
}

/** One step's activations: the workspace's first rows, one per token of the step. */
export interface StepActs {
  layout: StepLayout;
  cache: KvCache;
  /** The residual stream. */
  x: Activation;
  /** A normalised copy of x, the sublayers' input. */
  n: Activation;
  q: Activation;
  k: Activation;
  v: Activation;
  attn: Activation;
  /** A sublayer's output, before it joins the residual stream. */
  proj: Activation;
  gate: Activation;
  up: Activation;
}

/**
 * Scratch activations for steps of up to `tokens` rows, `outRows` output rows and
 * `logitRows` of them as logits (a hidden-state step needs no logits buffer).
 */
interface Workspace {
  tokens: number;
  outRows: number;
  logitRows: number;
  acts: Record<"x" | "n" | "q" | "k" | "v" | "attn" | "proj" | "gate" | "up", Activation>;
  last: Activation;
  logits: Activation;
}

/** A decoder file read once: its shape for the engine, `bind` for each backend and rank. */
export function decoderModel(
  file: GgufFile,
  hp: DecoderHparams,
  bind: (weights: WeightLoader) => Model,
): GgufModel {
  return {
    file,
    architecture: hp.architecture,
    shape: {
      nLayers: hp.nLayers,
      nKvHeads: hp.nKvHeads,
      headDim: hp.headDim,
      vocabSize: hp.vocabSize,
      embeddingLength: hp.nEmbd,
      contextLength: hp.contextLength,
    },
    pooling: readPooling(file, hp.architecture, hp.nEmbd),
    checkSplit: (size) => void shardDims(file, hp, size),
    load: (backend, shard) => bind(new WeightLoader(file, hp, backend, shard)),
  };
}

/**
 * The family of a decoder architecture: its hyperparameters read by `read` (which names what
 * is missing), its weights bound by `bind`.
 */
export function decoderFamily<H extends DecoderHparams>(
  architecture: string,
  read: (file: GgufFile, architecture: string) => H,
  bind: (weights: WeightLoader, hp: H) => Model,
): ModelFamily {
  return {
    architecture,
    read(file: GgufFile): GgufModel {
      const hp = read(file, architecture);
      return decoderModel(file, hp, (w) => bind(w, hp));
    },
  };
}

/** Binds the attention projections of layer `i` (this rank's heads). */
export function loadAttention(w: WeightLoader, hp: DecoderHparams, i: number): AttentionWeights {
  const { nEmbd, nHeads, nKvHeads, headDim } = hp;
  const b = `blk.${i}`;
  return {
    wq: w.weight(`${b}.attn_q.weight`, nEmbd, nHeads * headDim, w.byRows),
    wk: w.weight(`${b}.attn_k.weight`, nEmbd, nKvHeads * headDim, w.byRows),
    wv: w.weight(`${b}.attn_v.weight`, nEmbd, nKvHeads * headDim, w.byRows),
    wo: w.weight(`${b}.attn_output.weight`, nHeads * headDim, nEmbd, w.byCols),
  };
}

/** Binds the gated FFN of layer `i` (this rank's columns). */
export function loadFfn(w: WeightLoader, hp: DecoderHparams, i: number): FfnWeights {
  const b = `blk.${i}`;
  return {
    wGate: w.weight(`${b}.ffn_gate.weight`, hp.nEmbd, hp.nFf, w.byRows),
    wUp: w.weight(`${b}.ffn_up.weight`, hp.nEmbd, hp.nFf, w.byRows),
    wDown: w.weight(`${b}.ffn_down.weight`, hp.nFf, hp.nEmbd, w.byCols),
  };
}

/** Binds the embedding, the final norm and the output head (the embedding when tied). */
export function loadOuter(w: WeightLoader, hp: DecoderHparams): DecoderWeights {
  const tokenEmbd = w.weight("token_embd.weight", hp.nEmbd, hp.vocabSize);
  return {
    tokenEmbd,
    outputNorm: w.weight("output_norm.weight", hp.nEmbd),
    output: hp.tiedOutput ? tokenEmbd : w.weight("output.weight", hp.nEmbd, hp.vocabSize),
  };
}

export abstract class Decoder<L> implements Model {
  #workspace: Workspace | null = null;
  /** The heads and FFN columns this rank holds (all of them unsharded). */
  readonly local: ShardDims;
  protected readonly backend: Backend;
  protected readonly shard: ModelShard;

  protected constructor(
    readonly hparams: DecoderHparams,
    loader: WeightLoader,
    protected readonly outer: DecoderWeights,
    protected readonly layers: L[],
  ) {
    this.backend = loader.backend;
    this.shard = loader.shard;
    this.local = loader.local;
  }

  /** This rank's share of the cache: its KV heads. */
  get kvShape(): KvShape {
    return {
      nLayers: this.hparams.nLayers,
      nKvHeads: this.local.nKvHeads,
      headDim: this.hparams.headDim,
    };
  }

  /** One layer's ops on the step's activations: x in, x out. */
  protected abstract layer(weights: L, index: number, s: StepActs): void;

  /** x = the step's token embeddings (a family may scale them). */
  protected embed(x: Activation, ids: Int32Array): void {
    this.backend.embed(x, this.outer.tokenEmbd, ids);
  }

  /** The model's own rope (its base and its linear or YaRN scaling from the file) in `style`. */
  protected modelRope(style: RopeSpec["style"], freqFactors: Weight | null = null): RopeSpec {
    const { ropeBase, ropeScaling, headDim } = this.hparams;
    return {
      style,
      base: ropeBase,
      freqScale: ropeScaling.freqScale,
      freqFactors,
      yarn: ropeYarn(ropeScaling, ropeBase, headDim),
    };
  }

  /** The attention shape of this rank's heads, every position visible. */
  protected attentionShape(scale = 1 / Math.sqrt(this.hparams.headDim)): AttentionShape {
    return {
      nHeads: this.local.nHeads,
      nKvHeads: this.local.nKvHeads,
      headDim: this.hparams.headDim,
      scale,
    };
  }

  /**
   * s.proj = Wo · attention of s.q over the cache, after rotating s.q and s.k by `rope`
   * and storing s.k, s.v as layer `layer`'s K/V; summed over the ranks. Around a quantized
   * cache the heads also turn by the cache's Walsh-Hadamard rotations, as llama.cpp's do.
   */
  protected attend(
    s: StepActs,
    wo: Weight,
    layer: number,
    rope: RopeSpec,
    shape: AttentionShape,
  ): void {
    const be = this.backend;
    be.rope(s.q, s.layout, shape.nHeads, shape.headDim, rope);
    be.rope(s.k, s.layout, shape.nKvHeads, shape.headDim, rope);
    const turn = kvRotation(s.cache.spec.dtype, shape.headDim);
    if (turn !== null) {
      be.hadamard(s.q, turn.k);
      be.hadamard(s.k, turn.k);
      be.hadamard(s.v, turn.v);
    }
    be.storeKv(s.cache, layer, s.k, s.v, s.layout);
    be.attention(s.attn, s.q, s.cache, layer, s.layout, shape);
    if (turn !== null) be.hadamard(s.attn, turn.v);
    be.matmul(s.proj, wo, s.attn);
    this.sumOverRanks(s.proj);
  }

  /** s.proj = Wdown · (act(Wgate · s.n) * (Wup · s.n)), summed over the ranks. */
  protected ffn(s: StepActs, w: FfnWeights, act: "silu" | "gelu"): void {
    const be = this.backend;
    be.matmulMany([s.gate, s.up], [w.wGate, w.wUp], s.n);
    if (act === "silu") be.siluMul(s.gate, s.gate, s.up);
    else be.geluMul(s.gate, s.gate, s.up);
    be.matmul(s.proj, w.wDown, s.gate);
    this.sumOverRanks(s.proj);
  }

  /** Adds the partial products of the other ranks (nothing to add unsharded). */
  protected sumOverRanks(a: Activation): void {
    const group = this.shard.collective;
    if (this.shard.size > 1 && group !== null) this.backend.allReduce(a, group);
  }

  /**
   * Runs the tokens of one step (rows of possibly several sequences, see its layout)
   * through the model, writing their K/V into `cache`, and returns the output of the rows
   * listed in `step.logitRows`, in that order (none at all when the list is empty): one
   * row of `vocabSize` logits each, or with `step.output` "hidden" the final hidden state
   * after the output norm.
   */
  forward(step: Step, cache: KvCache): Activation {
    const outRows = step.logitRows.length;
    const hidden = step.output === "hidden";
    const ws = this.#workspaceFor(step.ids.length, outRows, hidden ? 0 : outRows);
    const out = this.backend.rowsOf(hidden ? ws.last : ws.logits, outRows);
    this.backend.runStep(step, cache, () => this.#record(step, cache, ws, out));
    return out;
  }

  /** The step's ops, issued through the backend; the output lands in `out`. */
  #record(step: Step, cache: KvCache, ws: Workspace, out: Activation): void {
    const be = this.backend;
    const hp = this.hparams;
    const n = step.ids.length;
    const acts = Object.fromEntries(
      Object.entries(ws.acts).map(([name, a]) => [name, be.rowsOf(a, n)]),
    ) as Workspace["acts"];
    const s: StepActs = { layout: step.layout, cache, ...acts };
    this.embed(s.x, step.ids);
    this.layers.forEach((l, i) => this.layer(l, i, s));
    // A step that only advances prompts (chunked prefill) needs no output head.
    if (step.logitRows.length === 0) return;
    const last = be.rowsOf(ws.last, step.logitRows.length);
    be.gatherRows(last, s.x, step.logitRows);
    be.rmsNorm(last, last, this.outer.outputNorm, hp.nEmbd, hp.rmsEps);
    if (step.output !== "hidden") be.matmul(out, this.outer.output, last);
  }

  /** Scratch space large enough for the step; grows (and frees the old one) when needed. */
  #workspaceFor(tokens: number, outRows: number, logitRows: number): Workspace {
    const cur = this.#workspace;
    if (
      cur !== null && cur.tokens >= tokens && cur.outRows >= outRows && cur.logitRows >= logitRows
    ) return cur;
    const hp = this.hparams;
    const be = this.backend;
    const t = Math.max(tokens, cur?.tokens ?? 0);
    const or = Math.max(1, outRows, cur?.outRows ?? 0);
    const lr = Math.max(1, logitRows, cur?.logitRows ?? 0);
    if (cur !== null) this.#freeWorkspace(cur);
    const qDim = this.local.nHeads * hp.headDim;
    const kvDim = this.local.nKvHeads * hp.headDim;
    this.#workspace = {
      tokens: t,
      outRows: or,
      logitRows: lr,
      acts: {
        x: be.activation(t, hp.nEmbd),
        n: be.activation(t, hp.nEmbd),
        q: be.activation(t, qDim),
        k: be.activation(t, kvDim),
        v: be.activation(t, kvDim),
        attn: be.activation(t, qDim),
        proj: be.activation(t, hp.nEmbd),
        gate: be.activation(t, this.local.nFf),
        up: be.activation(t, this.local.nFf),
      },
      last: be.activation(or, hp.nEmbd),
      logits: be.activation(lr, hp.vocabSize),
    };
    return this.#workspace;
  }

  #freeWorkspace(ws: Workspace): void {
    for (const a of [...Object.values(ws.acts), ws.last, ws.logits]) this.backend.free(a);
  }

  /** Frees the scratch space (weights and caches belong to the backend). */
  close(): void {
    if (this.#workspace !== null) this.#freeWorkspace(this.#workspace);
    this.#workspace = null;
  }
}
