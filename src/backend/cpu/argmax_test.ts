/**
 * Checker for argmax_rows (greedy decoding's pick, computed on the native logits): the
 * first index of the largest value, NaN never winning, at every level and thread count, on
 * rows small enough for the calling thread alone, one long row split over the threads,
 * and batches of rows; ties placed where the split would pick the wrong one.
 */

import { assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { Rng } from "../../gguf/mod.ts";
import { CpuKernelError } from "./errors.ts";
import { everyPool, randomF32, testKernels } from "../../../tests/support/cpu_kernels.ts";

/** The first index of the largest non-NaN value; 0 for a row of NaN. */
function argmaxRef(row: Float32Array): number {
  let best = -1;
  for (let i = 0; i < row.length; i++) {
    if (Number.isNaN(row[i])) continue;
    if (best < 0 || row[i] > row[best]) best = i;
  }
  return Math.max(best, 0);
}

function check(rows: number, cols: number, fill: (x: Float32Array) => void): Promise<void> {
  return everyPool((pool, what) => {
    const x = new Float32Array(rows * cols);
    fill(x);
    const out = new Int32Array(rows).fill(-1);
    pool.argmaxRows(x, rows, cols, out);
    const want = Int32Array.from(
      { length: rows },
      (_, r) => argmaxRef(x.subarray(r * cols, (r + 1) * cols)),
    );
    assertEquals(out, want, `${what} ${rows}x${cols}`);
  });
}

Deno.test("argmax_rows: random rows, serial, one row split over threads, batches", async () => {
  const rng = new Rng(41);
  for (const [rows, cols] of [[1, 37], [3, 100], [1, 151936], [5, 40000], [1, 100003]]) {
    await check(rows, cols, (x) => x.set(randomF32(rng, x.length)));
  }
});

Deno.test("argmax_rows: ties go to the first index, across lanes and thread shares", async () => {
  const cols = 151936;
  // Equal maxima in both halves (the second thread's share would otherwise win), in two
  // lanes of one vector, in two of the AVX-512 scan's four accumulators with the later one
  // holding the first index (21 in the second, 64 in the first), and at the very end.
  const ties = [[5, cols - 3], [17, 18], [21, 64], [48, 130], [cols - 2, cols - 1], [0, cols / 2]];
  for (const at of ties) {
    await check(1, cols, (x) => {
      x.fill(-1);
      for (const i of at) x[i] = 9;
    });
  }
});

Deno.test("argmax_rows: NaN never wins; -inf and all-NaN rows", async () => {
  const cols = 70000;
  await check(1, cols, (x) => {
    x.fill(0);
    x[3] = NaN;
    x[40000] = 1;
    x[cols - 1] = NaN;
  });
  await check(1, cols, (x) => x.fill(-Infinity));
  await check(2, 33, (x) => {
    x.fill(NaN);
    x[33 + 20] = -5;
  });
  await check(1, 16, (x) => {
    x.fill(NaN);
    x[0] = -Infinity;
  });
});

Deno.test("argmax_rows rejects a short output or input with a typed error", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  try {
    const x = new Float32Array(10);
    for (
      const fn of [
        () => pool.argmaxRows(x, 2, 5, new Int32Array(1)),
        () => pool.argmaxRows(x, 3, 5, new Int32Array(3)),
        () => pool.argmaxRows(x, 1, 0, new Int32Array(1)),
      ]
    ) {
      assertEquals(assertThrows(fn, CpuKernelError).code, "cpu_kernel_invalid");
    }
  } finally {
    pool.destroy();
  }
});
