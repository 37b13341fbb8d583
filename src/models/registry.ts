/**
 * The model families neuron runs, by `general.architecture`. Adding a family is one entry
 * here (see the README, "How it runs a model").
 */

import { architecture, type GgufFile, optionalArray } from "../gguf/mod.ts";
import { ModelError } from "./errors.ts";
import type { GgufModel, ModelFamily } from "./family.ts";
import { GEMMA3 } from "./gemma3.ts";
import { LLAMA } from "./llama.ts";
import { QWEN2 } from "./qwen2.ts";
import { QWEN3 } from "./qwen3.ts";
import { QWEN3MOE } from "./qwen3moe.ts";

const FAMILIES: readonly ModelFamily[] = [QWEN3, QWEN2, LLAMA, GEMMA3, QWEN3MOE];

/** The architectures some family reads. */
export const ARCHITECTURES: readonly string[] = FAMILIES.map((f) => f.architecture);

/**
 * Reads `file` with the family of its architecture. Besides what the family checks, the
 * tokenizer must not name more tokens than the model has embeddings for: every id it can
 * produce must be a row of the embedding.
 */
export function readModel(file: GgufFile): GgufModel {
  const arch = architecture(file);
  const family = FAMILIES.find((f) => f.architecture === arch);
  if (family === undefined) {
    throw new ModelError(
      "unsupported_architecture",
      `architecture '${arch}' is not supported (supported: ${ARCHITECTURES.join(", ")})`,
    );
  }
  const model = family.read(file);
  const tokens = optionalArray(file, "tokenizer.ggml.tokens")?.length;
  if (tokens !== undefined && tokens > model.shape.vocabSize) {
    throw new ModelError(
      "bad_hparams",
      `tokenizer.ggml.tokens lists ${tokens} tokens but token_embd.weight has only ` +
        `${model.shape.vocabSize} rows`,
    );
  }
  return model;
}
