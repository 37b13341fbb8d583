/**
 * Row draws (RowDraws) on host threads of a runner's own, for runners whose backend has none
 * to lend: a GPU's step brings its logits back to the host, and sixteen to sixty-four
 * streams drawing there one after another would hold the engine's thread for 3-30 ms a
 * step (0.2-0.5 ms a draw over a 152k vocabulary). The pool is the CPU kernel library's,
 * created at the first draw (a runner that never samples starts no threads) and destroyed
 * with the runner.
 */

import type { RowDraws } from "../backend/row_draws.ts";
import { CpuKernels } from "../backend/cpu/kernels.ts";
import type { Pool } from "../backend/cpu/pool.ts";

/** A GPU host's cores are many; a step's draws are as many as its sequences, and a pool's
 * idle workers spin a while after each step before they sleep. */
const MAX_THREADS = 16;

export class HostDraws implements RowDraws {
  #pool: Pool | null = null;

  private constructor(private readonly kernels: CpuKernels, readonly threads: number) {}

  /**
   * Draws on `threads` host threads (0: one per core), at most MAX_THREADS; null without the
   * CPU library.
   */
  static open(threads: number): HostDraws | null {
    const cores = navigator.hardwareConcurrency || 1;
    try {
      return new HostDraws(new CpuKernels(), Math.min(threads > 0 ? threads : cores, MAX_THREADS));
    } catch {
      return null;
    }
  }

  drawRows(...a: Parameters<RowDraws["drawRows"]>): Int32Array {
    this.#pool ??= this.kernels.createPool(this.threads);
    return this.#pool.drawRows(...a);
  }

  close(): void {
    this.#pool?.destroy();
    this.#pool = null;
  }
}
