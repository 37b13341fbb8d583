/** Qwen3's hyperparameters, read once from the GGUF metadata and checked. */

import type { GgufFile } from "../gguf/mod.ts";
import { optionalNumber, requireNumber } from "../gguf/metadata.ts";
import { ModelError } from "./errors.ts";

export interface Qwen3Hparams {
  nLayers: number;
  nEmbd: number;
  nFf: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  vocabSize: number;
  contextLength: number;
  ropeBase: number;
  rmsEps: number;
  tiedOutput: boolean;
}

export const ARCH = "qwen3";

/** A count read from `key`: a positive integer. */
function count(key: string, value: number): number {
  if (!(Number.isSafeInteger(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive integer, got ${value}`);
  }
  return value;
}

/** A scale read from `key`: finite and above zero. */
function positive(key: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive number, got ${value}`);
  }
  return value;
}

/**
 * Reads the hyper-parameters; every missing key is named in the error, and so is every
 * value no model can have (a count below 1, a NaN or negative epsilon or RoPE base).
 */
export function readQwen3Hparams(file: GgufFile): Qwen3Hparams {
  const key = (name: string): string => `${ARCH}.${name}`;
  const need = (name: string): number => count(key(name), requireNumber(file, key(name)));
  const maybe = (name: string, fallback: number): number =>
    count(key(name), optionalNumber(file, key(name)) ?? fallback);
  const nEmbd = need("embedding_length");
  const nHeads = need("attention.head_count");
  const nKvHeads = maybe("attention.head_count_kv", nHeads);
  if (nHeads % nKvHeads !== 0) {
    throw new ModelError("bad_hparams", `${nHeads} heads do not group into ${nKvHeads} KV heads`);
  }
  const embd = file.requireTensor("token_embd.weight");
  return {
    nLayers: need("block_count"),
    nEmbd,
    nFf: need("feed_forward_length"),
    nHeads,
    nKvHeads,
    headDim: maybe("attention.key_length", nEmbd / nHeads),
    vocabSize: count("token_embd.weight rows", embd.ne[1] ?? 0),
    contextLength: need("context_length"),
    ropeBase: positive(key("rope.freq_base"), optionalNumber(file, key("rope.freq_base")) ?? 10000),
    rmsEps: positive(
      key("attention.layer_norm_rms_epsilon"),
      requireNumber(file, key("attention.layer_norm_rms_epsilon")),
    ),
    tiedOutput: file.tensor("output.weight") === undefined,
  };
}
