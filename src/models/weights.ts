/**
 * Binding a GGUF's tensors to a backend, by name, with the shape the family expects: the
 * whole tensor, or under tensor parallelism this rank's rows or columns of it (shard.ts).
 */

import type { Backend, ExpertWeight, Weight } from "../backend/backend.ts";
import type { GgufFile, GgufTensorInfo } from "../gguf/mod.ts";
import { ModelError, ShardError } from "./errors.ts";
import { type ModelShard, WHOLE_MODEL } from "./family.ts";
import { sliceExperts } from "./expert_shard.ts";
import type { DecoderHparams } from "./hparams.ts";
import { type ShardDims, shardDims, sliceTensor, type TensorSplit } from "./shard.ts";

export class WeightLoader {
  /** This rank's output rows (Q, K, V, gate, up) or, for a vector, its entries (biases). */
  readonly byRows: TensorSplit;
  /** This rank's input columns (attention output, FFN down). */
  readonly byCols: TensorSplit;
  /** The heads and FFN columns this rank holds (all of them unsharded). */
  readonly local: ShardDims;

  /** Checks, before anything is bound, that `hp`'s model splits as `shard` asks. */
  constructor(
    readonly file: GgufFile,
    hp: DecoderHparams,
    readonly backend: Backend,
    readonly shard: ModelShard = WHOLE_MODEL,
  ) {
    this.local = shardDims(file, hp, shard.size, shard.rank);
    if (!(Number.isInteger(shard.rank) && shard.rank >= 0 && shard.rank < shard.size)) {
      throw new ShardError(`rank ${shard.rank} is not one of the ${shard.size} ranks`);
    }
    if (shard.size > 1 && shard.collective === null) {
      throw new ShardError(`a model split over ${shard.size} ranks needs their collective`);
    }
    this.byRows = { by: "rows", index: shard.rank, parts: shard.size };
    this.byCols = { by: "cols", index: shard.rank, parts: shard.size };
  }

  /** Whether the file has tensor `name`. */
  has(name: string): boolean {
    return this.file.tensor(name) !== undefined;
  }

  /**
   * Binds tensor `name` of `cols` x `rows` (whole, or this rank's `split` of it) after
   * checking its shape.
   */
  weight(name: string, cols: number, rows = 1, split?: TensorSplit): Weight {
    const t: GgufTensorInfo = this.file.requireTensor(name);
    if (t.ne[0] !== cols || (t.ne[1] ?? 1) !== rows || t.ne.slice(2).some((d) => d !== 1)) {
      throw new ModelError(
        "bad_tensor_shape",
        `tensor '${name}' has shape [${t.ne.join(", ")}], expected [${cols}, ${rows}]`,
      );
    }
    if (split === undefined || split.parts === 1) {
      return this.backend.loadWeight({
        name,
        type: t.type,
        rows,
        cols,
        bytes: this.file.data(t),
        pointer: this.file.pointer(t),
      });
    }
    const part = sliceTensor(this.file, t, rows, cols, split);
    return this.backend.loadWeight({ name, type: t.type, ...part });
  }

  /**
   * Binds the stack of `experts` matrices `name` (`cols` x `rows` each) after checking its
   * shape: whole, or this rank's FFN columns of every expert (`split` by rows: gate, up; by
   * columns: down).
   */
  experts(
    name: string,
    cols: number,
    rows: number,
    experts: number,
    split?: TensorSplit,
  ): ExpertWeight {
    const t: GgufTensorInfo = this.file.requireTensor(name);
    if (t.ne[0] !== cols || t.ne[1] !== rows || t.ne[2] !== experts || t.ne.length !== 3) {
      throw new ModelError(
        "bad_tensor_shape",
        `tensor '${name}' has shape [${t.ne.join(", ")}], expected [${cols}, ${rows}, ${experts}]`,
      );
    }
    const span = this.local.ffSpan;
    if (split === undefined || split.parts === 1 || span === undefined) {
      return this.backend.loadExperts({
        name,
        type: t.type,
        experts,
        rows,
        cols,
        bytes: this.file.data(t),
        pointer: this.file.pointer(t),
        expertStride: this.file.data(t).byteLength / experts,
      });
    }
    const part = sliceExperts(this.file, t, experts, rows, cols, { ...split, span });
    return this.backend.loadExperts({ name, type: t.type, experts, ...part });
  }

  /** A vector of `n` values split like the rows of the matrix it goes with (a bias). */
  vector(name: string, n: number, split?: TensorSplit): Weight {
    const asCols = split === undefined ? undefined : { ...split, by: "cols" as const };
    return this.weight(name, n, 1, asCols);
  }
}
