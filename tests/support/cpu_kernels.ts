/**
 * Shared by the kernel checker tests: the library (built if stale), random operands and
 * error measures.
 */

import { buildCpuKernels } from "../../kernels/build_cpu.ts";
import type { Rng } from "../../src/gguf/mod.ts";
import { CpuKernels, type Pool } from "../../src/backend/cpu/kernels.ts";

let kernels: CpuKernels | undefined;

/** The kernel library, rebuilt first when its sources changed. */
export async function testKernels(): Promise<CpuKernels> {
  if (!kernels) {
    await buildCpuKernels();
    kernels = new CpuKernels();
  }
  return kernels;
}

/** Runs `fn` on a pool per (level, thread count) this CPU has. */
export async function everyPool(
  fn: (pool: Pool, what: string, k: CpuKernels) => void,
): Promise<void> {
  const k = await testKernels();
  for (const threads of [1, 2]) {
    const pool = k.createPool(threads);
    try {
      for (const isa of k.supportedIsas()) {
        pool.isa = isa;
        fn(pool, `${isa} threads=${threads}`, k);
      }
    } finally {
      pool.destroy();
    }
  }
}

/** n standard-normal f32 values. */
export function randomF32(rng: Rng, n: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.normal() * scale;
  return out;
}

/** max |a - b| / rms(b): an error on the scale of the typical output. */
export function relError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let maxDiff = 0, sumSq = 0;
  for (let i = 0; i < b.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    sumSq += b[i] * b[i];
  }
  const rms = Math.sqrt(sumSq / b.length);
  return maxDiff / (rms || 1);
}

/** max |a - b|. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < b.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
