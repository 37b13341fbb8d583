/**
 * The hyperparameters every decoder family reads the same way (`<arch>.block_count`, heads,
 * rope base, norm epsilon, ...), read once from the GGUF metadata and checked, and the
 * reader a family uses for its own keys: every missing key is named in the error, and so is
 * every value no model can have (a count below 1, a NaN or negative epsilon or rope base).
 */

import type { GgufFile } from "../gguf/mod.ts";
import { ArchKeys, checkCount } from "./arch_keys.ts";
import { ModelError } from "./errors.ts";
import { readRopeScaling, type RopeScaling } from "./rope_scaling.ts";

export { ArchKeys } from "./arch_keys.ts";

export interface DecoderHparams {
  architecture: string;
  nLayers: number;
  nEmbd: number;
  nFf: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  vocabSize: number;
  contextLength: number;
  ropeBase: number;
  /** Linear or YaRN rope scaling (`rope.scaling.*`). */
  ropeScaling: RopeScaling;
  rmsEps: number;
  tiedOutput: boolean;
  /** A mixture-of-experts FFN (moe_hparams.ts); nFf is then one expert's width. */
  experts?: ExpertHparams;
}

/** The routed experts of a mixture-of-experts FFN. */
export interface ExpertHparams {
  /** Experts per layer. */
  count: number;
  /** Experts each token is routed to. */
  used: number;
}

/**
 * The hyperparameters of a decoder whose metadata keys start with `architecture`. A model
 * with experts is refused unless the family reads them (`experts`).
 */
export function readDecoderHparams(
  file: GgufFile,
  architecture: string,
  experts = false,
): DecoderHparams {
  const keys = new ArchKeys(file, architecture);
  const nEmbd = keys.count("embedding_length");
  const nHeads = keys.count("attention.head_count");
  const nKvHeads = keys.countOr("attention.head_count_kv", nHeads);
  if (nHeads % nKvHeads !== 0) {
    throw new ModelError("bad_hparams", `${nHeads} heads do not group into ${nKvHeads} KV heads`);
  }
  const headDim = keys.countOr("attention.key_length", nEmbd / nHeads);
  const rotated = keys.countOr("rope.dimension_count", headDim);
  if (rotated !== headDim) {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("rope.dimension_count")} is ${rotated}: rope over part of a ${headDim}-wide ` +
        "head is not supported",
    );
  }
  if (!experts && keys.countOr("expert_count", 1) > 1) {
    throw new ModelError(
      "unsupported_architecture",
      `${architecture} with ${keys.key("expert_count")} experts (mixture of experts) is not ` +
        "supported",
    );
  }
  const embd = file.requireTensor("token_embd.weight");
  const contextLength = keys.count("context_length");
  return {
    architecture,
    nLayers: keys.count("block_count"),
    nEmbd,
    nFf: keys.count("feed_forward_length"),
    nHeads,
    nKvHeads,
    headDim,
    vocabSize: checkCount("token_embd.weight rows", embd.ne[1] ?? 0),
    contextLength,
    ropeBase: keys.positiveOr("rope.freq_base", 10000),
    ropeScaling: readRopeScaling(keys, contextLength),
    rmsEps: keys.positive("attention.layer_norm_rms_epsilon"),
    tiedOutput: file.tensor("output.weight") === undefined,
  };
}
