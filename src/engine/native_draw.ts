/**
 * The sampled draw of truncation.ts run in the CPU kernel library (kernels/cpu/sample.c):
 * the same steps in the same double arithmetic, so a seed draws the same token either way
 * (native_draw_test checks it). In TypeScript a draw over a 152k vocabulary costs 1-2 ms,
 * which sixteen streams pay sixteen times a step. Where the library cannot be loaded the
 * sampler keeps to truncation.ts.
 */

import { openCpuLibrary } from "../backend/cpu/library.ts";
import { EXP_TABLE } from "./exp_table.ts";
import type { DrawParams } from "./truncation.ts";

type Library = ReturnType<typeof openCpuLibrary>;

export class NativeDraw {
  readonly #sym: Library["symbols"];
  readonly #params = new Float64Array(6);
  #scratch = new Uint8Array(0);
  #scratchFor = -1;

  private constructor(lib: Library) {
    this.#sym = lib.symbols;
  }

  /** The library's draw, or null where it cannot be loaded. */
  static open(): NativeDraw | null {
    try {
      return new NativeDraw(openCpuLibrary());
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
    q[0] = p.temperature;
    q[1] = p.cutoff;
    q[2] = p.topK;
    q[3] = p.topP;
    q[4] = p.minP;
    q[5] = p.u;
    const run = reference ? this.#sym.nk_sample_draw_ref : this.#sym.nk_sample_draw;
    return Number(run(x, BigInt(x.length), q, EXP_TABLE, this.#scratch));
  }
}

let shared: NativeDraw | null | undefined;

/** One NativeDraw for the process (draws run one at a time on the engine's thread). */
export function nativeDraw(): NativeDraw | null {
  if (shared === undefined) shared = NativeDraw.open();
  return shared;
}
