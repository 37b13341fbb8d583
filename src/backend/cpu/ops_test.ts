/**
 * Checker for the row and element-wise kernels (RMSNorm, RoPE in both layouts, SiLU and
 * GELU gates, add, bias, scale, embedding lookup, f16 conversion) against float64 TypeScript references, at every
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
import { ROPE_NEOX, ROPE_NORM, type RopeAngles } from "./kernels.ts";
import type { RopeYarn } from "../backend.ts";
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

interface RopeCase {
  base: number;
  /** Linear position scaling (default 1). */
  scale?: number;
  /** Per-pair divisors (default none). */
  factors?: Float32Array;
  style?: "neox" | "norm";
  yarn?: RopeYarn;
}

const f32 = Math.fround;

/** Pair i's angle under YaRN from its extrapolated and interpolated angles, f32 step by step. */
function yarnAngle(y: RopeYarn, i: number, extrap: number, interp: number): number {
  if (y.extFactor === 0) return interp;
  const ramp = f32(
    1 - Math.min(1, Math.max(0, f32(f32(i - y.low) / Math.max(0.001, y.high - y.low)))),
  );
  const mix = f32(ramp * y.extFactor);
  return f32(f32(interp * f32(1 - mix)) + f32(extrap * mix));
}

/**
 * RoPE as ggml computes it: theta advances by f32 multiplication, then ÷ factor, × scale;
 * YaRN mixes the two angles and scales cos and sin.
 */
function ropeRef(
  x: Float32Array,
  nTokens: number,
  nHeads: number,
  d: number,
  pos: Int32Array,
  rope: RopeCase,
) {
  const out = Float64Array.from(x);
  const half = d / 2;
  const thetaScale = Math.fround(Math.pow(rope.base, Math.fround(-2 / d)));
  const [stride, gap] = rope.style === "norm" ? [2, 1] : [1, half];
  for (let t = 0; t < nTokens; t++) {
    let theta = Math.fround(pos[t]);
    for (let i = 0; i < half; i++) {
      const f = rope.factors === undefined ? theta : Math.fround(theta / rope.factors[i]);
      const interp = Math.fround((rope.scale ?? 1) * f);
      const angle = rope.yarn ? yarnAngle(rope.yarn, i, f, interp) : interp;
      const m = rope.yarn?.mscale ?? 1;
      const c = Math.cos(angle) * m, s = Math.sin(angle) * m;
      for (let h = 0; h < nHeads; h++) {
        const o = (t * nHeads + h) * d + i * stride;
        const x0 = x[o], x1 = x[o + gap];
        out[o] = x0 * c - x1 * s;
        out[o + gap] = x0 * s + x1 * c;
      }
      theta = Math.fround(theta * thetaScale);
    }
  }
  return out;
}

function ropeAngles(rope: RopeCase): RopeAngles {
  return {
    freqBase: rope.base,
    freqScale: rope.scale ?? 1,
    freqFactors: rope.factors ?? null,
    mode: rope.style === "norm" ? ROPE_NORM : ROPE_NEOX,
    yarn: rope.yarn ?? null,
  };
}

Deno.test("rope turns NeoX pairs (i, i + d/2) or NORM pairs (2i, 2i + 1) as ggml does, with scaling and factors", async () => {
  const rng = new Rng(12);
  const factors = Float32Array.from({ length: 64 }, (_, i) => 1 + (i % 7) * 0.75);
  const cases: RopeCase[] = [
    { base: 1e6 },
    { base: 1e4, style: "norm" },
    { base: 5e5, style: "norm", factors },
    { base: 1e6, scale: 0.125 },
  ];
  await everyPool((pool, what) => {
    for (const rope of cases) {
      for (const [nTokens, nHeads, d] of [[5, 3, 64], [70, 4, 128]]) {
        const pos = Int32Array.from(
          { length: nTokens },
          (_, t) => [0, 1, 7, 100, 40000][t % 5] + t,
        );
        const x = randomF32(rng, nTokens * nHeads * d);
        const got = x.slice();
        const angles = ropeAngles({ ...rope, factors: rope.factors?.slice(0, d / 2) });
        pool.rope(got, nTokens, nHeads, d, pos, angles);
        const want = ropeRef(x, nTokens, nHeads, d, pos, rope);
        const err = maxAbsDiff(got, want);
        assert(err < 2e-5, `${what} ${JSON.stringify(rope)} ${nTokens}x${nHeads}x${d}: ${err}`);
      }
    }
  });
  // Position 0 is the identity; the other layout would move other features.
  const k = await testKernels();
  const pool = k.createPool(1);
  const x = randomF32(rng, 64);
  const neox = x.slice(), norm = x.slice();
  pool.rope(neox, 1, 1, 64, Int32Array.of(3), ropeAngles({ base: 10000 }));
  pool.rope(norm, 1, 1, 64, Int32Array.of(3), ropeAngles({ base: 10000, style: "norm" }));
  assertEquals(neox[1] === x[1], false);
  assertEquals(neox[33] === x[33], false);
  assertEquals(norm[1] === neox[1], false);
  const still = x.slice();
  pool.rope(still, 1, 1, 64, Int32Array.of(0), ropeAngles({ base: 10000 }));
  assertEquals(still, x);
  pool.destroy();
});

Deno.test("rope: the angle tables a pool keeps never serve another position, shape or rope", async () => {
  const rng = new Rng(14);
  const factors = Float32Array.from({ length: 32 }, (_, i) => 1 + i / 8);
  const other = factors.map((f) => f * 2);
  await everyPool((pool, what) => {
    // The pool keeps 64 positions' tables at first: 5, 69 and 133 share a slot, repeats
    // share a table, a 300-token call grows the cache, and another head size, base, scale
    // or factor list (two ropes alternating, as Gemma 3's layers do) gets its own tables.
    const calls: [number, RopeCase, number[]][] = [
      [64, { base: 1e6 }, [5, 69, 133, 5, 69]],
      [64, { base: 1e6 }, [133, 5]],
      [128, { base: 1e6 }, [5, 69]],
      [64, { base: 1e4 }, [5, 69]],
      [64, { base: 1e6 }, [5, 69]],
      [64, { base: 1e4 }, [69, 5]],
      [64, { base: 1e6, scale: 0.5 }, [69, 5]],
      [64, { base: 1e6, factors }, [5, 69]],
      [64, { base: 1e6, factors: other }, [5, 69]],
      [64, { base: 1e6 }, Array.from({ length: 300 }, (_, t) => (t * 37) % 512)],
      [64, { base: 1e6 }, [69, 5, 133]],
    ];
    for (const [d, rope, positions] of calls) {
      const pos = Int32Array.from(positions), n = pos.length;
      const x = randomF32(rng, n * 2 * d);
      const got = x.slice();
      pool.rope(got, n, 2, d, pos, ropeAngles(rope));
      const err = maxAbsDiff(got, ropeRef(x, n, 2, d, pos, rope));
      assert(err < 2e-5, `${what} d=${d} ${JSON.stringify(rope)} ${positions.slice(0, 5)}: ${err}`);
    }
  });
});

Deno.test("rope with YaRN (Qwen3 at 4x its 32768 positions) matches the f32 reference at positions sampled over 0..131071", async () => {
  const rng = new Rng(15);
  // ggml's terms for base 1e6, 128-wide heads, factor 4 over 32768 (models/rope_scaling.ts
  // makes them): pairs up to 23 keep their angle, from 40 on they are interpolated, and
  // cos and sin are scaled by 1 + 0.1 ln 4.
  const qwen3: RopeYarn = { extFactor: 1, low: 23, high: 40, mscale: Math.fround(1.1386294) };
  const factors = Float32Array.from({ length: 64 }, (_, i) => 1 + (i % 5) * 0.5);
  const cases: RopeCase[] = [
    { base: 1e6, scale: 0.25, yarn: qwen3 },
    { base: 5e5, scale: 0.125, style: "norm", factors, yarn: { ...qwen3, low: 3, high: 9 } },
    { base: 1e4, scale: 0.5, yarn: { extFactor: 0.5, low: 7, high: 7, mscale: 1 } },
    { base: 1e6, scale: 1, yarn: { extFactor: 0, low: 0, high: 0, mscale: 0.75 } },
  ];
  const sampled = Int32Array.from(
    { length: 96 },
    (_, t) => t < 4 ? [0, 1, 40960, 131071][t] : rng.int(131072),
  );
  await everyPool((pool, what) => {
    for (const rope of cases) {
      for (const [nHeads, d] of [[2, 128], [3, 64]]) {
        const x = randomF32(rng, sampled.length * nHeads * d);
        const got = x.slice();
        const angles = ropeAngles({ ...rope, factors: rope.factors?.slice(0, d / 2) });
        pool.rope(got, sampled.length, nHeads, d, sampled, angles);
        const want = ropeRef(x, sampled.length, nHeads, d, sampled, rope);
        const err = maxAbsDiff(got, want);
        assert(err < 2e-5, `${what} ${JSON.stringify(rope.yarn)} ${nHeads}x${d}: ${err}`);
      }
    }
  });
  // The angle tables a pool keeps are keyed by the YaRN terms: another ramp, weight or
  // magnitude never reuses them.
  const k = await testKernels();
  const pool = k.createPool(1);
  const pos = Int32Array.of(41000, 5);
  for (
    const yarn of [qwen3, { ...qwen3, low: 19 }, { ...qwen3, mscale: 1 }, {
      ...qwen3,
      extFactor: 0.5,
    }, qwen3]
  ) {
    const x = randomF32(rng, 2 * 128);
    const got = x.slice();
    pool.rope(got, 2, 1, 128, pos, ropeAngles({ base: 1e6, scale: 0.25, yarn }));
    const err = maxAbsDiff(got, ropeRef(x, 2, 1, 128, pos, { base: 1e6, scale: 0.25, yarn }));
    assert(err < 2e-5, `${JSON.stringify(yarn)}: ${err}`);
  }
  const refused = (yarn: RopeYarn) =>
    assertThrows(
      () => pool.rope(new Float32Array(128), 1, 1, 128, pos, ropeAngles({ base: 1e6, yarn })),
      CpuKernelError,
    );
  refused({ ...qwen3, mscale: 0 });
  refused({ ...qwen3, low: NaN });
  pool.destroy();
});

/** GELU's tanh approximation, in f64. */
function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

Deno.test("silu_mul, gelu_mul, add, add_bias and scale match the f64 reference on serial and parallel sizes", async () => {
  const rng = new Rng(13);
  await everyPool((pool, what) => {
    for (const n of [37 * 3, 100003 * 3]) {
      const g = randomF32(rng, n, 4), u = randomF32(rng, n);
      g[0] = -100;
      g[1] = 100;
      const out = new Float32Array(n);
      pool.siluMul(out, g, u, n);
      const want = Float64Array.from(g, (v, i) => (v / (1 + Math.exp(-v))) * u[i]);
      assert(maxAbsDiff(out, want) < 1e-5 * 100, `${what} silu n=${n}`);
      assert(relError(out, want) < 1e-5, `${what} silu n=${n}`);
      pool.geluMul(out, g, u, n);
      const wantGelu = Float64Array.from(g, (v, i) => gelu(v) * u[i]);
      assert(maxAbsDiff(out, wantGelu) < 1e-5 * 100, `${what} gelu n=${n}`);
      assert(relError(out, wantGelu) < 1e-5, `${what} gelu n=${n}`);
      pool.add(out, g, u, n);
      assertEquals(out, Float32Array.from(g, (v, i) => v + u[i]), `${what} add n=${n}`);
      const cols = n / 3, bias = randomF32(rng, cols);
      pool.addBias(out, g, bias, n, cols);
      assertEquals(out, Float32Array.from(g, (v, i) => v + bias[i % cols]), `${what} bias n=${n}`);
      pool.scale(out, g, 8, n);
      assertEquals(out, Float32Array.from(g, (v) => v * 8), `${what} scale n=${n}`);
    }
    assertThrows(() =>
      pool.addBias(new Float32Array(10), new Float32Array(10), new Float32Array(3), 10, 3)
    );
    assertThrows(() => pool.scale(new Float32Array(4), new Float32Array(4), NaN, 4));
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
