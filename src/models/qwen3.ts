/**
 * Qwen3, written once against the Backend ops. Per layer:
 *
 *   h   = x + Wo · attn(rope(qnorm(Wq · n1)), rope(knorm(Wk · n1)), Wv · n1),  n1 = rms(x)
 *   out = h + Wdown · (silu(Wgate · n2) * (Wup · n2)),                          n2 = rms(h)
 *
 * and logits = Wout · rms(x_last), or rms(x) itself for the rows an embedding is pooled
 * from. Q and K are RMS-normalised per head before RoPE (the Qwen3 change from Qwen2); the
 * output matrix is the token embedding when tied.
 *
 * Under tensor parallelism (qwen3_shard.ts) a rank holds some heads and FFN columns; Wo and
 * Wdown then give partial sums, added over the ranks before each residual.
 */

import type { GgufFile, GgufTensorInfo } from "../gguf/mod.ts";
import type {
  Activation,
  AttentionShape,
  Backend,
  KvCache,
  KvShape,
  Step,
  Weight,
} from "../backend/backend.ts";
import { ModelError, ShardError } from "./errors.ts";
import {
  type GgufModel,
  type Model,
  type ModelFamily,
  type ModelShard,
  WHOLE_MODEL,
} from "./family.ts";
import { readPooling } from "./pooling.ts";
import { ARCH, type Qwen3Hparams, readQwen3Hparams } from "./qwen3_hparams.ts";
import { type ShardDims, shardDims, sliceTensor, type TensorSplit } from "./qwen3_shard.ts";

/** The Qwen3 family (registry.ts). */
export const QWEN3: ModelFamily = {
  architecture: ARCH,
  read(file: GgufFile): GgufModel {
    const hp = readQwen3Hparams(file);
    return {
      file,
      architecture: ARCH,
      shape: {
        nLayers: hp.nLayers,
        nKvHeads: hp.nKvHeads,
        headDim: hp.headDim,
        vocabSize: hp.vocabSize,
        embeddingLength: hp.nEmbd,
        contextLength: hp.contextLength,
      },
      pooling: readPooling(file, ARCH, hp.nEmbd),
      checkSplit: (size) => void shardDims(file, hp, size),
      load: (backend, shard) => Qwen3Model.load(file, hp, backend, shard),
    };
  },
};

interface LayerWeights {
  attnNorm: Weight;
  wq: Weight;
  wk: Weight;
  wv: Weight;
  wo: Weight;
  qNorm: Weight;
  kNorm: Weight;
  ffnNorm: Weight;
  wGate: Weight;
  wUp: Weight;
  wDown: Weight;
}

/**
 * Scratch activations for steps of up to `tokens` rows, `outRows` output rows and
 * `logitRows` of them as logits (a hidden-state step needs no logits buffer).
 */
interface Workspace {
  tokens: number;
  outRows: number;
  logitRows: number;
  x: Activation;
  n: Activation;
  q: Activation;
  k: Activation;
  v: Activation;
  attn: Activation;
  proj: Activation;
  gate: Activation;
  up: Activation;
  last: Activation;
  logits: Activation;
}

/** Binds tensor `name` (whole, or this rank's `split` of it) after checking its shape. */
function loadWeight(
  file: GgufFile,
  backend: Backend,
  name: string,
  shape: [cols: number, rows?: number],
  split?: TensorSplit,
): Weight {
  const t: GgufTensorInfo = file.requireTensor(name);
  const [cols, rows = 1] = shape;
  if (t.ne[0] !== cols || (t.ne[1] ?? 1) !== rows || t.ne.slice(2).some((d) => d !== 1)) {
    throw new ModelError(
      "bad_tensor_shape",
      `tensor '${name}' has shape [${t.ne.join(", ")}], expected [${cols}, ${rows}]`,
    );
  }
  if (split === undefined || split.parts === 1) {
    return backend.loadWeight({
      name,
      type: t.type,
      rows,
      cols,
      bytes: file.data(t),
      pointer: file.pointer(t),
    });
  }
  return backend.loadWeight({ name, type: t.type, ...sliceTensor(file, t, rows, cols, split) });
}

export class Qwen3Model implements Model {
  #workspace: Workspace | null = null;

  /** This rank's share of the cache: its KV heads. */
  get kvShape(): KvShape {
    return {
      nLayers: this.hparams.nLayers,
      nKvHeads: this.local.nKvHeads,
      headDim: this.hparams.headDim,
    };
  }

  private constructor(
    readonly hparams: Qwen3Hparams,
    /** The heads and FFN columns this rank holds (all of them unsharded). */
    readonly local: ShardDims,
    private readonly shard: ModelShard,
    private readonly backend: Backend,
    private readonly tokenEmbd: Weight,
    private readonly layers: LayerWeights[],
    private readonly outputNorm: Weight,
    private readonly output: Weight,
  ) {}

  /**
   * Binds every tensor of `file` (this rank's part of it under `shard`) to `backend`,
   * checking names and shapes, and that the model splits as asked.
   */
  static load(
    file: GgufFile,
    hp: Qwen3Hparams,
    backend: Backend,
    shard: ModelShard = WHOLE_MODEL,
  ): Qwen3Model {
    const { nEmbd, nFf, nHeads, nKvHeads, headDim, vocabSize } = hp;
    const local = shardDims(file, hp, shard.size);
    if (!(Number.isInteger(shard.rank) && shard.rank >= 0 && shard.rank < shard.size)) {
      throw new ShardError(`rank ${shard.rank} is not one of the ${shard.size} ranks`);
    }
    if (shard.size > 1 && shard.collective === null) {
      throw new ShardError(`a model split over ${shard.size} ranks needs their collective`);
    }
    const byRows: TensorSplit = { by: "rows", index: shard.rank, parts: shard.size };
    const byCols: TensorSplit = { by: "cols", index: shard.rank, parts: shard.size };
    const w = (name: string, cols: number, rows?: number, split?: TensorSplit): Weight =>
      loadWeight(file, backend, name, [cols, rows], split);
    const tokenEmbd = w("token_embd.weight", nEmbd, vocabSize);
    const layers = Array.from({ length: hp.nLayers }, (_, i): LayerWeights => {
      const b = `blk.${i}`;
      return {
        attnNorm: w(`${b}.attn_norm.weight`, nEmbd),
        wq: w(`${b}.attn_q.weight`, nEmbd, nHeads * headDim, byRows),
        wk: w(`${b}.attn_k.weight`, nEmbd, nKvHeads * headDim, byRows),
        wv: w(`${b}.attn_v.weight`, nEmbd, nKvHeads * headDim, byRows),
        wo: w(`${b}.attn_output.weight`, nHeads * headDim, nEmbd, byCols),
        qNorm: w(`${b}.attn_q_norm.weight`, headDim),
        kNorm: w(`${b}.attn_k_norm.weight`, headDim),
        ffnNorm: w(`${b}.ffn_norm.weight`, nEmbd),
        wGate: w(`${b}.ffn_gate.weight`, nEmbd, nFf, byRows),
        wUp: w(`${b}.ffn_up.weight`, nEmbd, nFf, byRows),
        wDown: w(`${b}.ffn_down.weight`, nFf, nEmbd, byCols),
      };
    });
    const outputNorm = w("output_norm.weight", nEmbd);
    const output = hp.tiedOutput ? tokenEmbd : w("output.weight", nEmbd, vocabSize);
    return new Qwen3Model(hp, local, shard, backend, tokenEmbd, layers, outputNorm, output);
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
    const { ids, layout, logitRows } = step;
    const hp = this.hparams;
    const { nHeads, nKvHeads } = this.local;
    const be = this.backend;
    const n = ids.length;
    const rows = (a: Activation): Activation => be.rowsOf(a, n);
    const [x, xn, q, k, v, attn, proj, gate, up] = [
      ws.x,
      ws.n,
      ws.q,
      ws.k,
      ws.v,
      ws.attn,
      ws.proj,
      ws.gate,
      ws.up,
    ].map(rows);
    const shape: AttentionShape = {
      nHeads,
      nKvHeads,
      headDim: hp.headDim,
      scale: 1 / Math.sqrt(hp.headDim),
    };

    be.embed(x, this.tokenEmbd, ids);
    this.layers.forEach((l, layer) => {
      be.rmsNorm(xn, x, l.attnNorm, hp.nEmbd, hp.rmsEps);
      be.matmulMany([q, k, v], [l.wq, l.wk, l.wv], xn);
      be.rmsNorm(q, q, l.qNorm, hp.headDim, hp.rmsEps);
      be.rmsNorm(k, k, l.kNorm, hp.headDim, hp.rmsEps);
      be.ropeNeox(q, layout, nHeads, hp.headDim, hp.ropeBase);
      be.ropeNeox(k, layout, nKvHeads, hp.headDim, hp.ropeBase);
      be.storeKv(cache, layer, k, v, layout);
      be.attention(attn, q, cache, layer, layout, shape);
      be.matmul(proj, l.wo, attn);
      this.#sumOverRanks(proj);
      be.add(x, x, proj);

      be.rmsNorm(xn, x, l.ffnNorm, hp.nEmbd, hp.rmsEps);
      be.matmulMany([gate, up], [l.wGate, l.wUp], xn);
      be.siluMul(gate, gate, up);
      be.matmul(proj, l.wDown, gate);
      this.#sumOverRanks(proj);
      be.add(x, x, proj);
    });

    // A step that only advances prompts (chunked prefill) needs no output head.
    if (logitRows.length === 0) return;
    const last = be.rowsOf(ws.last, logitRows.length);
    be.gatherRows(last, x, logitRows);
    be.rmsNorm(last, last, this.outputNorm, hp.nEmbd, hp.rmsEps);
    if (step.output !== "hidden") be.matmul(out, this.output, last);
  }

  /** Adds the partial products of the other ranks (nothing to add unsharded). */
  #sumOverRanks(a: Activation): void {
    const group = this.shard.collective;
    if (this.shard.size > 1 && group !== null) this.backend.allReduce(a, group);
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
      x: be.activation(t, hp.nEmbd),
      n: be.activation(t, hp.nEmbd),
      q: be.activation(t, qDim),
      k: be.activation(t, kvDim),
      v: be.activation(t, kvDim),
      attn: be.activation(t, qDim),
      proj: be.activation(t, hp.nEmbd),
      gate: be.activation(t, this.local.nFf),
      up: be.activation(t, this.local.nFf),
      last: be.activation(or, hp.nEmbd),
      logits: be.activation(lr, hp.vocabSize),
    };
    return this.#workspace;
  }

  #freeWorkspace(ws: Workspace): void {
    const { tokens: _t, outRows: _o, logitRows: _l, ...acts } = ws;
    for (const a of Object.values(acts)) this.backend.free(a);
  }

  /** Frees the scratch space (weights and caches belong to the backend). */
  close(): void {
    if (this.#workspace !== null) this.#freeWorkspace(this.#workspace);
    this.#workspace = null;
  }
}
