/**
 * What the engine needs from a model, whatever runs it: one step of tokens in, logits of
 * the rows that are sampled out. A LocalRunner runs the model on a backend in this thread;
 * a tensor-parallel runner (tp/) fans the same step out to ranks in other processes. The
 * engine only decides *what* runs each step (scheduling, cache blocks, sampling).
 */

import type { Step, StepInterrupt } from "../backend/backend.ts";
import type { RowDraws } from "../backend/row_draws.ts";
import type { ModelShape } from "../models/family.ts";

export interface ModelRunner {
  readonly shape: ModelShape;
  /** The backend kind ("cpu", "cuda", ...). */
  readonly device: string;
  /** Bytes of the KV cache pool (every rank's share together). */
  readonly kvBytes: number;
  /**
   * Runs one step; returns `step.logitRows.length` rows of `vocabSize` logits. A runner
   * whose backend can stop between ops stops when `interrupt` fires and returns null: the
   * step's work (its cache rows included) is then left half done, to be run again.
   * With `into` (off-heap, at least rows × vocabSize long) the rows are read into it and
   * come back as its subarray: a caller that reads every step's rows and lets them go
   * before the next step spares the host a fresh allocation per step (Backend.read).
   */
  forward(step: Step): Float32Array;
  forward(
    step: Step,
    interrupt: StepInterrupt | undefined,
    into?: Float32Array,
  ): Float32Array | null;
  /**
   * `forward`, returning only each logit row's argmax (greedy decoding); with `masks` (one
   * per logit row, Backend.argmaxRows), a masked row's among the tokens its bitset allows.
   */
  forwardArgmax(
    step: Step,
    interrupt?: StepInterrupt,
    masks?: readonly (Uint32Array | null)[],
  ): Int32Array | null;
  /**
   * Copies positions [0, rows) of cache block `from` into `to`; absent where the cache is
   * spread over processes. Without it, prefixes are shared by whole blocks only.
   */
  readonly copyKvRows?: (from: number, to: number, rows: number) => void;
  /**
   * Draws sampled tokens from rows of logits on the host, several at once over the
   * runner's own threads (RowDraws); absent where it has none to spare.
   */
  readonly drawRows?: RowDraws["drawRows"];
  /** Bytes held on the device (weights, cache, scratch); 0 where memory is the host's. */
  deviceBytes(): number;
  close(): void;
}
