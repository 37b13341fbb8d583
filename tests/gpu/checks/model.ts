/**
 * Whole-model behaviour on a device backend with a small synthetic Qwen3 (a vocabulary
 * of 512, so it is quick even emulated): decode steps replayed from CUDA graphs give the
 * same logits as launched one by one, sequences decoded together give the same logits as
 * each alone, a batched prefill agrees with token-by-token decoding, and K/V rows copied
 * between blocks serve as the rows they copy.
 */

import type {
  Activation,
  Backend,
  KvCache,
  KvDType,
  StepLayout,
} from "../../../src/backend/backend.ts";
import { type GgufFile, openGguf } from "../../../src/gguf/mod.ts";
import type { Model } from "../../../src/models/family.ts";
import { readModel } from "../../../src/models/registry.ts";
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

/**
 * SMALL_SHAPE with heads of 128: a quantized cache then turns q and K by chunks of 128 and
 * V by 64 (kvRotation), where heads of 64 turn both by 64.
 */
export const HEADS_128_SHAPE = { ...SMALL_SHAPE, headDim: 128 };

/** Writes the small synthetic model of `quant` into `dir`; returns its path. */
export function smallModel(dir: string, quant: FileType): string {
  const path = `${dir}/small-${quant}.gguf`;
  writeSyntheticQwen3(path, { shape: SMALL_SHAPE, quant, seed: 7 });
  return path;
}

export class Decoder {
  readonly model: Model;
  readonly vocabSize: number;
  readonly cache: KvCache;
  readonly #file: GgufFile;

  constructor(path: string, readonly backend: Backend, dtype: KvDType = "f16") {
    this.#file = openGguf(path);
    const gguf = readModel(this.#file);
    this.model = gguf.load(backend);
    this.vocabSize = gguf.shape.vocabSize;
    this.cache = backend.createKvCache({
      ...this.model.kvShape,
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
    return this.model.forward({
      ids: Int32Array.from(ids),
      layout: { positions: Int32Array.from(positions), sequences },
      logitRows: Int32Array.from(logitRows),
    }, this.cache);
  }

  close(): void {
    this.model.close();
    this.#file.close();
  }
}

/**
 * K/V rows copied into another block (a prefix shared to the middle of a block) serve the
 * next token exactly as the rows computed in place: the logits are bitwise equal.
 */
export function checkCopiedRows(d: Decoder): void {
  const be = d.backend;
  const prompt = Array.from({ length: 20 }, (_, i) => (i * 53 + 7) % 512);
  const own = Int32Array.from([6, 2]), copied = Int32Array.from([6, 5]);
  be.read(d.step([prompt], [0], [own]));
  // Positions 16..19 sit in rows 0..3 of block 2.
  be.copyKvRows(d.cache, 2, 5, 4);
  const inPlace = be.read(d.step([[99]], [20], [own]));
  const fromCopy = be.read(d.step([[99]], [20], [copied]));
  if (inPlace.some((v, i) => !Object.is(v, fromCopy[i]))) {
    throw new Error("logits from copied K/V rows differ from the rows computed in place");
  }
}
