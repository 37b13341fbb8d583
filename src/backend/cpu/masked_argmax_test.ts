/**
 * Checker for argmax_rows under token masks (greedy decoding with structured output): the
 * fast scan (all-ones words to the vector scan, zero words skipped, mixed words bit by
 * bit, one row split over the threads) against its plain reference and the TypeScript
 * one, at every level and thread count; a planted forbidden maximum makes a mask that is
 * not honoured show.
 */

import { assertEquals, assertNotEquals, assertThrows } from "../../../tests/support/assert.ts";
import { Rng } from "../../gguf/mod.ts";
import { argmax, maskedArgmax } from "../../common/argmax.ts";
import { CpuKernelError } from "./errors.ts";
import { everyPool, randomF32, testKernels } from "../../../tests/support/cpu_kernels.ts";

type Masks = (Uint32Array | null)[];

function allow(bits: Uint32Array, i: number): void {
  bits[i >>> 5] |= 1 << (i & 31);
}

function has(bits: Uint32Array, i: number): boolean {
  return (bits[i >>> 5] & (1 << (i & 31))) !== 0;
}

/** A mask allowing each column with probability `density`, in runs as grammars make them. */
function randomMask(rng: Rng, cols: number, density: number): Uint32Array {
  const bits = new Uint32Array(Math.ceil(cols / 32));
  for (let i = 0; i < cols;) {
    const run = 1 + Math.floor(rng.float() * 200);
    const on = rng.float() < density;
    for (let j = i; j < Math.min(cols, i + run); j++) if (on) allow(bits, j);
    i += run;
  }
  return bits;
}

/** Every (pool) pick equals the plain C scan's and the TypeScript reference's. */
function check(x: Float32Array, rows: number, cols: number, masks: Masks): Promise<Int32Array> {
  const want = Int32Array.from({ length: rows }, (_, r) => {
    const row = x.subarray(r * cols, (r + 1) * cols);
    return masks[r] === null ? argmax(row) : maskedArgmax(row, masks[r]!);
  });
  return everyPool((pool, what) => {
    const ref = new Int32Array(rows).fill(-1);
    pool.argmaxRowsRef(x, rows, cols, ref, masks);
    assertEquals(ref, want, `reference ${rows}x${cols}`);
    const out = new Int32Array(rows).fill(-1);
    pool.argmaxRows(x, rows, cols, out, masks);
    assertEquals(out, want, `${what} ${rows}x${cols}`);
  }).then(() => want);
}

Deno.test("masked argmax_rows: random rows and masks, serial, split, batches", async () => {
  const rng = new Rng(7);
  for (const [rows, cols] of [[1, 37], [3, 100], [1, 151936], [4, 40001], [1, 100003]]) {
    for (const density of [0.002, 0.1, 0.5, 0.97, 1]) {
      const x = randomF32(rng, rows * cols);
      const masks: Masks = Array.from({ length: rows }, (_, r) => {
        if (r === 1) return null;
        const bits = randomMask(rng, cols, density);
        // Each row's best allowed value stays below a forbidden maximum planted beside it.
        const row = x.subarray(r * cols, (r + 1) * cols);
        allow(bits, rng.int(cols));
        const out = rng.int(cols);
        if (!has(bits, out)) row[out] = 100;
        return bits;
      });
      const got = await check(x, rows, cols, masks);
      for (let r = 0; r < rows; r++) {
        if (masks[r] !== null) assertEquals(has(masks[r]!, got[r]), true, `row ${r} allowed`);
      }
    }
  }
});

Deno.test("masked argmax_rows: one allowed token, all but one forbidden, ends of rows", async () => {
  for (const cols of [151936, 151937, 70003, 33]) {
    for (const only of [0, 31, 32, cols - 1, Math.floor(cols / 2) + 5]) {
      const x = Float32Array.from({ length: cols }, (_, i) => (i * 7919) % 1000);
      const bits = new Uint32Array(Math.ceil(cols / 32));
      allow(bits, only);
      assertEquals(await check(x, 1, cols, [bits]), Int32Array.of(only), `${cols}: only ${only}`);
      // Everything but `only`: the unmasked best is forbidden.
      const rest = new Uint32Array(bits.length).fill(0xffffffff);
      rest[only >>> 5] &= ~(1 << (only & 31));
      x[only] = 5000;
      const got = await check(x, 1, cols, [rest]);
      assertNotEquals(got[0], only);
    }
  }
});

Deno.test("masked argmax_rows: ties go to the lowest allowed index", async () => {
  const cols = 151936;
  for (const at of [[5, cols - 3], [17, 18], [cols - 2, cols - 1], [40, cols / 2 + 40]]) {
    const x = new Float32Array(cols).fill(-1);
    x[1] = 50; // forbidden
    for (const i of at) x[i] = 9;
    // Every column but 1 (dense), and the tied ones with a few more (sparse).
    const dense = new Uint32Array(cols / 32).fill(0xffffffff);
    dense[0] &= ~2;
    const sparse = new Uint32Array(cols / 32);
    for (const i of [...at, 3, 1000, cols - 5]) allow(sparse, i);
    const x2 = new Float32Array(2 * cols);
    x2.set(x);
    x2.set(x, cols);
    assertEquals(await check(x2, 2, cols, [dense, sparse]), Int32Array.of(at[0], at[0]));
  }
});

Deno.test("masked argmax_rows: NaN never wins; -inf rows; an allowed set of NaN", async () => {
  const cols = 70000;
  const x = new Float32Array(cols).fill(-Infinity);
  x[10] = NaN;
  const bits = new Uint32Array(Math.ceil(cols / 32));
  for (const i of [10, 300, 69999]) allow(bits, i);
  assertEquals(await check(x, 1, cols, [bits]), Int32Array.of(300));
  x[300] = NaN;
  x[69999] = NaN;
  assertEquals(await check(x, 1, cols, [bits]), Int32Array.of(10));
});

Deno.test("masked argmax_rows rejects masks that do not fit, with a typed error", async () => {
  const k = await testKernels();
  const pool = k.createPool(2);
  try {
    const x = new Float32Array(2 * 70);
    const out = new Int32Array(2);
    for (
      const fn of [
        () => pool.argmaxRows(x, 2, 70, out, [new Uint32Array(3)]),
        () => pool.argmaxRows(x, 2, 70, out, [new Uint32Array(2), null]),
        () => pool.argmaxRowsRef(x, 2, 70, out, [new Uint32Array(3)]),
      ]
    ) {
      assertEquals(assertThrows(fn, CpuKernelError).code, "cpu_kernel_invalid");
    }
  } finally {
    pool.destroy();
  }
});
