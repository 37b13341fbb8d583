/**
 * The hyperparameters of a mixture-of-experts decoder: the shared ones (hparams.ts), and
 * its experts as llama.cpp reads them: `expert_count` experts per layer, each token routed
 * to `expert_used_count` of them, each expert an FFN of `expert_feed_forward_length`
 * columns (absent: feed_forward_length / expert_used_count, llama.cpp's fallback).
 */

import type { GgufFile } from "../gguf/mod.ts";
import { ModelError } from "./errors.ts";
import {
  ArchKeys,
  type DecoderHparams,
  type ExpertHparams,
  readDecoderHparams,
} from "./hparams.ts";

/** llama.cpp's LLAMA_MAX_EXPERTS. */
export const MAX_EXPERTS = 512;

/** A decoder whose FFN is routed experts: nFf is the width of one expert. */
export type MoeHparams = DecoderHparams & { experts: ExpertHparams };

export function readMoeHparams(file: GgufFile, architecture: string): MoeHparams {
  const hp = readDecoderHparams(file, architecture, true);
  const keys = new ArchKeys(file, architecture);
  const count = keys.count("expert_count");
  const used = keys.count("expert_used_count");
  if (count > MAX_EXPERTS) {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("expert_count")} is ${count}, more than the ${MAX_EXPERTS} llama.cpp allows`,
    );
  }
  if (used > count) {
    throw new ModelError(
      "bad_hparams",
      `${keys.key("expert_used_count")} is ${used}, more than the ${count} experts`,
    );
  }
  if (keys.countOr("expert_group_count", 1) > 1) {
    throw new ModelError(
      "unsupported_architecture",
      `${architecture} with ${keys.key("expert_group_count")} > 1 (grouped expert selection) ` +
        "is not supported",
    );
  }
  const nFf = keys.countOr("expert_feed_forward_length", Math.floor(hp.nFf / used));
  return { ...hp, nFf, experts: { count, used } };
}
