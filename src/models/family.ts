/**
 * What a model family is to the rest of neuron. A family reads its hyperparameters from a
 * GGUF file once (naming any key that is missing or absurd) and can then bind the weights
 * to a backend; outside it, only the model's shape is known. `registry.ts` picks the family
 * by `general.architecture`.
 */

import type {
  Activation,
  Backend,
  Collective,
  KvCache,
  KvShape,
  Step,
} from "../backend/backend.ts";
import type { GgufFile } from "../gguf/mod.ts";
import type { ModelPooling } from "./pooling.ts";

/** The sizes the engine and the KV cache need, whatever the family. */
export interface ModelShape {
  nLayers: number;
  nKvHeads: number;
  headDim: number;
  vocabSize: number;
  /** Width of a hidden state (`<arch>.embedding_length`): a "hidden" step output row. */
  embeddingLength: number;
  /** The context the model was trained for (`<arch>.context_length`). */
  contextLength: number;
}

/** Which part of the model this process computes (tensor parallelism). */
export interface ModelShard {
  rank: number;
  size: number;
  /** Sums the partial products over the ranks; required when size > 1. */
  collective: Collective | null;
}

export const WHOLE_MODEL: ModelShard = { rank: 0, size: 1, collective: null };

/** A model's weights bound to a backend: one forward pass per step. */
export interface Model {
  /** The K/V geometry of this rank's cache (its share of the KV heads). */
  readonly kvShape: KvShape;
  /**
   * Runs the tokens of one step (rows of possibly several sequences, see its layout),
   * writing their K/V into `cache`, and returns the output of `step.logitRows`, in that
   * order: a row of `vocabSize` logits each, or with `step.output` "hidden" the final
   * hidden state after the output norm (`embeddingLength` wide).
   */
  forward(step: Step, cache: KvCache): Activation;
  /** Frees the model's scratch memory (weights and caches belong to the backend). */
  close(): void;
}

/** A GGUF model file read once: its family's hyperparameters, checked and kept. */
export interface GgufModel {
  readonly file: GgufFile;
  readonly architecture: string;
  readonly shape: ModelShape;
  /** Whether it makes text, embeddings or rerank scores, and how it pools (pooling.ts). */
  readonly pooling: ModelPooling;
  /** Throws a ShardError (code `unshardable`) unless the model splits over `size` ranks. */
  checkSplit(size: number): void;
  /** Binds the weights (this rank's part of them under `shard`) to `backend`. */
  load(backend: Backend, shard?: ModelShard): Model;
}

export interface ModelFamily {
  /** `general.architecture` of the files this family reads. */
  readonly architecture: string;
  /** Reads and checks the hyperparameters of `file`. */
  read(file: GgufFile): GgufModel;
}
