/**
 * The sampled draw of truncation.ts, and what sampler.ts's log-probs need of a row, run in
 * the CPU kernel library (kernels/cpu/sample.c): the same steps in the same double
 * arithmetic, so a seed draws the same token and a log-prob comes out the same to the bit
 * either way (native_sampling_test checks both). In TypeScript a draw over a 152k
 * vocabulary costs 1-2 ms and log-probs 0.6-1 ms, which sixteen streams pay sixteen times
 * a step. Where the library cannot be loaded the sampler keeps to TypeScript.
 */

import { NK_SAMPLE_PARAMS, openCpuLibrary } from "../backend/cpu/library.ts";
import { EXP_TABLE } from "./exp_table.ts";
import type { DrawParams } from "./truncation.ts";

type Library = ReturnType<typeof openCpuLibrary>;

/** What tokenLogprobs needs of a row of logits. */
export interface RowSummary {
  /** The largest logit (NaN skipped). */
  max: number;
  /** The sum of e^-(max - logit) over the row, by the exp table. */
  sum: number;
  /** The best indices asked for, best first (ties: the lower). */
  top: Int32Array;
}

export class NativeSampling {
  readonly #sym: Library["symbols"];
  readonly #params = new Float64Array(NK_SAMPLE_PARAMS);
  readonly #summary = new Float64Array(2);
  #top = new Int32Array(0);
  #scratch = new Uint8Array(0);
  #scratchFor = -1;

  private constructor(lib: Library) {
    this.#sym = lib.symbols;
  }

  /** The library's sampling, or null where it cannot be loaded. */
  static open(): NativeSampling | null {
    try {
      return new NativeSampling(openCpuLibrary());
    } catch {
      return null;
    }
  }

  /**
   * The token the draw picks from logits `x`; -1 when no value is a candidate. `reference`
   * takes sample.c's plain C throughout (the checker's), not its vector candidate pass.
   */
  draw(x: Float32Array, p: DrawParams, reference = false): number {
    if (this.#scratchFor < x.length) {
      this.#scratch = new Uint8Array(Number(this.#sym.nk_sample_scratch_bytes(BigInt(x.length))));
      this.#scratchFor = x.length;
    }
    const q = this.#params;
    packDraw(p, q, 0);
    const run = reference ? this.#sym.nk_sample_draw_ref : this.#sym.nk_sample_draw;
    return Number(run(x, BigInt(x.length), q, EXP_TABLE, this.#scratch));
  }

  /**
   * The row's largest logit, its sum of exponentials and its `top` best indices, as
   * tokenLogprobs computes them; `reference` as for `draw`. `top` is a view, overwritten
   * by the next call.
   */
  summary(x: Float32Array, top: number, reference = false): RowSummary {
    if (this.#top.length < top) this.#top = new Int32Array(top);
    const run = reference ? this.#sym.nk_sample_logprobs_ref : this.#sym.nk_sample_logprobs;
    const n = run(x, BigInt(x.length), EXP_TABLE, top, this.#top, this.#summary);
    return { max: this.#summary[0], sum: this.#summary[1], top: this.#top.subarray(0, n) };
  }
}

/** `p` as the library reads a draw's parameters, at into[6 at, 6 at + 6) (NK_SAMPLE_*). */
export function packDraw(p: DrawParams, into: Float64Array, at: number): void {
  const o = NK_SAMPLE_PARAMS * at;
  into[o] = p.temperature;
  into[o + 1] = p.cutoff;
  into[o + 2] = p.topK;
  into[o + 3] = p.topP;
  into[o + 4] = p.minP;
  into[o + 5] = p.u;
}

let shared: NativeSampling | null | undefined;

/** One NativeSampling for the process (sampling runs one row at a time on the engine's
 * thread). */
export function nativeSampling(): NativeSampling | null {
  if (shared === undefined) shared = NativeSampling.open();
  return shared;
}
