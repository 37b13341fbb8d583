/**
 * The hyperparameters every decoder family reads the same way (`<arch>.block_count`, heads,
 * rope base, norm epsilon, ...), read once from the GGUF metadata and checked, and the
 * reader a family uses for its own keys: every missing key is named in the error, and so is
 * every value no model can have (a count below 1, a NaN or negative epsilon or rope base).
 */

import type { GgufFile } from "../gguf/mod.ts";
import { optionalNumber, optionalString, requireNumber } from "../gguf/metadata.ts";
import { ModelError } from "./errors.ts";

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
  /** Linear rope scaling: 1 / `rope.scaling.factor` (1: none). */
  ropeFreqScale: number;
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

/** Reads the keys of one architecture (`<arch>.<name>`), checked. */
export class ArchKeys {
  constructor(readonly file: GgufFile, readonly architecture: string) {}

  key(name: string): string {
    return `${this.architecture}.${name}`;
  }

  /** A count that must be present: a positive integer. */
  count(name: string): number {
    return checkCount(this.key(name), requireNumber(this.file, this.key(name)));
  }

  /** A count that may be absent (then `fallback`). */
  countOr(name: string, fallback: number): number {
    return checkCount(this.key(name), optionalNumber(this.file, this.key(name)) ?? fallback);
  }

  /** A scale that must be present: finite and above zero. */
  positive(name: string): number {
    return checkPositive(this.key(name), requireNumber(this.file, this.key(name)));
  }

  /** A scale that may be absent (then `fallback`). */
  positiveOr(name: string, fallback: number): number {
    return checkPositive(this.key(name), optionalNumber(this.file, this.key(name)) ?? fallback);
  }

  /** A number that may be absent (then `fallback`), unchecked beyond its type. */
  numberOr(name: string, fallback: number): number {
    return optionalNumber(this.file, this.key(name)) ?? fallback;
  }
}

function checkCount(key: string, value: number): number {
  if (!(Number.isSafeInteger(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive integer, got ${value}`);
  }
  return value;
}

function checkPositive(key: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) {
    throw new ModelError("bad_hparams", `${key} must be a positive number, got ${value}`);
  }
  return value;
}

/** 1 / the linear rope scaling factor; other scalings are refused by name. */
function ropeFreqScale(keys: ArchKeys): number {
  const type = optionalString(keys.file, keys.key("rope.scaling.type")) ?? "linear";
  const factor = keys.numberOr("rope.scaling.factor", keys.numberOr("rope.scale_linear", 0));
  if (type === "none" || factor === 0 || factor === 1) return 1;
  if (type !== "linear") {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("rope.scaling.type")} '${type}' is not supported (only linear scaling is)`,
    );
  }
  return 1 / checkPositive(keys.key("rope.scaling.factor"), factor);
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
  return {
    architecture,
    nLayers: keys.count("block_count"),
    nEmbd,
    nFf: keys.count("feed_forward_length"),
    nHeads,
    nKvHeads,
    headDim,
    vocabSize: checkCount("token_embd.weight rows", embd.ne[1] ?? 0),
    contextLength: keys.count("context_length"),
    ropeBase: keys.positiveOr("rope.freq_base", 10000),
    ropeFreqScale: ropeFreqScale(keys),
    rmsEps: keys.positive("attention.layer_norm_rms_epsilon"),
    tiedOutput: file.tensor("output.weight") === undefined,
  };
}
