/**
 * The host array a step's output rows (logits, or hidden states to pool) are read into,
 * kept from step to step. A fresh array per step costs the host a page fault per 4 KiB
 * at first touch: measured on the CI machine, 3 MB of logits (a k = 4 verification of a
 * 152k vocabulary) took 8-11 ms to read into a new array and 0.5 ms into a kept one,
 * which is most of the difference between a sampled and a greedy verification step.
 * The engine consumes every row within the step that produced it, so one array serves.
 */

/** The most a kept array holds; a larger step (echoed prompt logprobs) reads into a new one. */
export const MAX_KEPT_BYTES = 64 * 2 ** 20;

export class StepRows {
  #rows = new Float32Array(0);

  /** An array for `values` floats: the kept one (grown first) or, past MAX_KEPT_BYTES, none. */
  target(values: number): Float32Array | undefined {
    if (4 * values > MAX_KEPT_BYTES) return undefined;
    if (this.#rows.length < values) {
      // Off-heap, so that a device can copy into it (Backend.read).
      this.#rows = new Float32Array(new ArrayBuffer(4 * values));
    }
    return this.#rows;
  }
}
