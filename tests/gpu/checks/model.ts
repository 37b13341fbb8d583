/**
 * Whole-model behaviour on a device backend with a small synthetic Qwen3 (a vocabulary
 * of 512, so it is quick even emulated): decode steps replayed from CUDA graphs give the
 * same logits as launched one by one, sequences decoded together give the same logits as
 * each alone, and a batched prefill agrees with token-by-token decoding.
 */

import type { Activation, Backend, KvCache, StepLayout } from "../../../src/backend/backend.ts";
import { type GgufFile, openGguf } from "../../../src/gguf/mod.ts";
import { Qwen3Model } from "../../../src/models/qwen3.ts";
import { writeSyntheticQwen3 } from "../../../src/models/qwen3_synthetic.ts";
import type { FileType } from "../../../src/gguf/quant_mix.ts";

export const SMALL_SHAPE = {
  hidden: 256,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  ffn: 512,
  vocab: 512,
  tiedOutput: false,
};

/** Writes the small synthetic model of `quant` into `dir`; returns its path. */
export function smallModel(dir: string, quant: FileType): string {
  const path = `${dir}/small-${quant}.gguf`;
  writeSyntheticQwen3(path, { shape: SMALL_SHAPE, quant, seed: 7 });
  return path;
}

export class Decoder {
  readonly model: Qwen3Model;
  readonly cache: KvCache;
  readonly #file: GgufFile;

  constructor(path: string, readonly backend: Backend, dtype: "f16" | "f32" = "f16") {
    this.#file = openGguf(path);
    this.model = Qwen3Model.load(this.#file, backend);
    const hp = this.model.hparams;
    this.cache = backend.createKvCache({
      nLayers: hp.nLayers,
      nKvHeads: hp.nKvHeads,
      headDim: hp.headDim,
      blockSize: 16,
      nBlocks: 32,
      dtype,
    });
  }

  /** One step: `rows[s]` tokens of sequence s at `starts[s]`, logits of each last row. */
  step(tokens: number[][], starts: number[], tables: Int32Array[]): Activation {
    const ids: number[] = [];
    const positions: number[] = [];
    const sequences: StepLayout["sequences"] = [];
    const logitRows: number[] = [];
    tokens.forEach((toks, s) => {
      sequences.push({ rowStart: ids.length, rowCount: toks.length, blockTable: tables[s] });
      toks.forEach((t, i) => {
        ids.push(t);
        positions.push(starts[s] + i);
      });
      logitRows.push(ids.length - 1);
    });
    return this.model.forward(
      Int32Array.from(ids),
      { positions: Int32Array.from(positions), sequences },
      this.cache,
      Int32Array.from(logitRows),
    );
  }

  close(): void {
    this.model.close();
    this.#file.close();
  }
}
