/**
 * Checker for the row and element-wise kernels (RMSNorm, NeoX RoPE, SiLU gate, add,
 * embedding lookup, f16 conversion) against float64 TypeScript references, at every
 * dispatch level of this CPU with 1 and 2 threads, on sizes that take both the
 * calling-thread-only and the parallel paths.
 */

import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import {
  dequantize,
  f16ToF32,
  f32ToF16,
  ggmlTypeByName,
  randomBlocks,
  Rng,
} from "../../gguf/mod.ts";
import { CpuKernelError } from "./errors.ts";
import {
  everyPool,
  maxAbsDiff,
  randomF32,
  relError,
  testKernels,
} from "../../../tests/support/cpu_kernels.ts";

function rmsnormRef(
  x: Float32Array,
  w: Float32Array | null,
  rows: number,
  dim: number,
  eps: number,
) {
  const out = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[r * dim + i] ** 2;
    const scale = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = x[r * dim + i] * scale * (w ? w[i] : 1);
  }
  return out;
}

Deno.test("rmsnorm matches the f64 reference, with and without weight, in place", async () => {
  const rng = new Rng(11);
  await everyPool((pool, what) => {
    for (const [rows, dim] of [[3, 1000], [40, 1000], [64, 128]]) {
      const x = randomF32(rng, rows * dim, 3);
      const w = randomF32(rng, dim);
      const out = new Float32Array(rows * dim);
      pool.rmsnorm(out, x, w, rows, dim, 1e-6);
      assert(relError(out, rmsnormRef(x, w, rows, dim, 1e-6)) < 1e-5, `${what} ${rows}x${dim}`);
      const inPlace = x.slice();
      pool.rmsnorm(inPlace, inPlace, null, rows, dim, 1e-6);
      assert(relError(inPlace, rmsnormRef(x, null, rows, dim, 1e-6)) < 1e-5, `${what} in place`);
    }
  });
});

/** NeoX RoPE as ggml computes it: theta advances by f32 multiplication. */
function ropeRef(
  x: Float32Array,
  nTokens: number,
  nHeads: number,
  d: number,
  pos: Int32Array,
  base: number,
) {
  const out = Float64Array.from(x);
  const half = d / 2;
  const thetaScale = Math.fround(Math.pow(base, Math.fround(-2 / d)));
  for (let t = 0; t < nTokens; t++) {
    let theta = Math.fround(pos[t]);
    for (let i = 0; i < half; i++) {
      const c = Math.cos(theta), s = Math.sin(theta);
      for (let h = 0; h < nHeads; h++) {
        const o = (t * nHeads + h) * d;
        const x0 = x[o + i], x1 = x[o + i + half];
        out[o + i] = x0 * c - x1 * s;
        out[o + i + half] = x0 * s + x1 * c;
      }
      theta = Math.fround(theta * thetaScale);
    }
  }
  return out;
}

Deno.test("rope_neox rotates pairs (i, i + d/2) by pos * base^(-2i/d), per-token positions", async () => {
  const rng = new Rng(12);
  await everyPool((pool, what) => {
    for (const [nTokens, nHeads, d] of [[5, 3, 64], [70, 4, 128]]) {
      const pos = Int32Array.from({ length: nTokens }, (_, t) => [0, 1, 7, 100, 40000][t % 5] + t);
      const x = randomF32(rng, nTokens * nHeads * d);
      const got = x.slice();
      pool.ropeNeox(got, nTokens, nHeads, d, pos, 1e6);
      const want = ropeRef(x, nTokens, nHeads, d, pos, 1e6);
      assert(
        maxAbsDiff(got, want) < 2e-5,
        `${what} ${nTokens}x${nHeads}x${d}: ${maxAbsDiff(got, want)}`,
      );
    }
  });
  // Position 0 is the identity; the NORM layout (pairs 2i, 2i+1) would move it elsewhere.
  const k = await testKernels();
  const pool = k.createPool(1);
  const x = randomF32(rng, 64);
  const moved = x.slice();
  pool.ropeNeox(moved, 1, 1, 64, Int32Array.of(3), 10000);
  assertEquals(moved[1] === x[1], false);
  const still = x.slice();
  pool.ropeNeox(still, 1, 1, 64, Int32Array.of(0), 10000);
  assertEquals(still, x);
  pool.destroy();
});

Deno.test("rope_neox: the angle tables a pool keeps never serve another position or shape", async () => {
  const rng = new Rng(14);
  await everyPool((pool, what) => {
    // The pool keeps 64 positions' tables at first: 5, 69 and 133 share a slot, repeats
    // share a table, a 300-token call grows the cache, and another head size or base
    // replaces the tables.
    const calls: [number, number, number[]][] = [
      [64, 1e6, [5, 69, 133, 5, 69]],
      [64, 1e6, [133, 5]],
      [128, 1e6, [5, 69]],
      [64, 1e4, [5, 69]],
      [64, 1e6, Array.from({ length: 300 }, (_, t) => (t * 37) % 512)],
      [64, 1e6, [69, 5, 133]],
    ];
    for (const [d, base, positions] of calls) {
      const pos = Int32Array.from(positions), n = pos.length;
      const x = randomF32(rng, n * 2 * d);
      const got = x.slice();
      pool.ropeNeox(got, n, 2, d, pos, base);
      const err = maxAbsDiff(got, ropeRef(x, n, 2, d, pos, base));
      assert(err < 2e-5, `${what} d=${d} base=${base} positions ${positions.slice(0, 5)}: ${err}`);
    }
  });
});

Deno.test("silu_mul and add match the f64 reference on serial and parallel sizes", async () => {
  const rng = new Rng(13);
  await everyPool((pool, what) => {
    for (const n of [37, 100003]) {
      const g = randomF32(rng, n, 4), u = randomF32(rng, n);
      g[0] = -100;
      g[1] = 100;
      const out = new Float32Array(n);
      pool.siluMul(out, g, u, n);
      const want = Float64Array.from(g, (v, i) => (v / (1 + Math.exp(-v))) * u[i]);
      assert(maxAbsDiff(out, want) < 1e-5 * 100, `${what} silu n=${n}`);
      assert(relError(out, want) < 1e-5, `${what} silu n=${n}`);
      pool.add(out, g, u, n);
      assertEquals(out, Float32Array.from(g, (v, i) => v + u[i]), `${what} add n=${n}`);
    }
  });
});

Deno.test("get_rows dequantizes the requested rows of any type and rejects bad ids", async () => {
  const rng = new Rng(14);
  await everyPool((pool, what) => {
    for (const name of ["F16", "Q8_0", "Q4_K", "Q6_K", "BF16"]) {
      const type = ggmlTypeByName(name)!;
      const rows = 50, cols = 512;
      const table = randomBlocks(type, (rows * cols) / type.blockSize, rng);
      const all = dequantize(type, table, rows * cols);
      const ids = Int32Array.from({ length: 70 }, () => rng.int(rows));
      const out = new Float32Array(ids.length * cols);
      pool.getRows(type.id, table, rows, cols, ids, out);
      for (let i = 0; i < ids.length; i++) {
        const want = all.subarray(ids[i] * cols, (ids[i] + 1) * cols);
        assertEquals(out.subarray(i * cols, (i + 1) * cols), want, `${what} ${name} id ${ids[i]}`);
      }
      const err = assertThrows(
        () => pool.getRows(type.id, table, rows, cols, Int32Array.of(0, rows), out),
        CpuKernelError,
      );
      assertEquals(err.code, "cpu_kernel_invalid");
    }
  });
});

Deno.test("f16 conversions round to nearest even like F16C, specials included", async () => {
  const k = await testKernels();
  const rng = new Rng(15);
  const values = [
    0,
    -0,
    1,
    -2.5,
    65504,
    65520,
    1e6,
    -1e6,
    6e-8,
    3e-8,
    2.9e-8,
    1e-40,
    Infinity,
    -Infinity,
  ];
  for (let i = 0; i < 5000; i++) values.push(rng.normal() * Math.pow(2, rng.int(40) - 25));
  const src = Float32Array.from(values);
  const half = new Uint16Array(src.length);
  k.f32ToF16(src, half, src.length);
  assertEquals(Array.from(half), Array.from(src, (v) => f32ToF16(v)));
  const nan = new Uint16Array(1);
  k.f32ToF16(Float32Array.of(NaN), nan, 1);
  assert(Number.isNaN(f16ToF32(nan[0])));
  const back = new Float32Array(half.length);
  k.f16ToF32(half, back, half.length);
  assertEquals(Array.from(back), Array.from(half, (h) => f16ToF32(h)));
});
