import {
  assert,
  assertEquals,
  assertNotEquals,
  assertThrows,
} from "../../../tests/support/assert.ts";
import { DEQUANTIZABLE_TYPES, dequantize } from "../dequant/mod.ts";
import { GgufError } from "../errors.ts";
import { Rng } from "../rng.ts";
import { GgmlType, ggmlTypeInfo, type GgmlTypeName } from "../types.ts";
import { canRandomize, QUANTIZABLE_TYPES, quantize, quantizeRow, randomBlocks } from "./mod.ts";

/**
 * Upper bounds on RMS(error) / RMS(signal) for N(0, 1) data, about 15% above what ggml's
 * reference quantizers reach (the theory for b-bit uniform levels with per-block scales:
 * Q8_0 ~0.5%, Q6_K ~1.8%, Q4_K ~7%, Q3_K ~15%, Q2_K ~30%).
 */
const MAX_REL_RMSE: Record<string, number> = {
  F32: 0,
  F16: 3e-4,
  BF16: 2.5e-3,
  Q8_0: 0.0065,
  Q6_K: 0.021,
  Q5_K: 0.042,
  Q5_1: 0.044,
  Q5_0: 0.05,
  Q4_K: 0.083,
  Q4_1: 0.09,
  Q4_0: 0.1,
  Q3_K: 0.175,
  Q2_K: 0.34,
};

function gaussian(n: number, seed: number): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => rng.normal());
}

function relRmse(x: Float32Array, y: Float32Array): number {
  let e = 0, s = 0;
  for (let i = 0; i < x.length; i++) {
    e += (x[i] - y[i]) ** 2;
    s += x[i] ** 2;
  }
  return Math.sqrt(e / s);
}

Deno.test("quantize -> dequantize error is within ggml's range for every type", () => {
  const x = gaussian(256 * 64, 5);
  for (const type of QUANTIZABLE_TYPES) {
    const err = relRmse(x, dequantize(type, quantize(type, x), x.length));
    assert(err <= MAX_REL_RMSE[type.name], `${type.name}: relative RMSE ${err.toFixed(5)}`);
  }
  const names = QUANTIZABLE_TYPES.map((t) => t.name).sort();
  assertEquals(names, Object.keys(MAX_REL_RMSE).sort());
});

Deno.test("quantizers keep zeros zero and exactly representable blocks exact", () => {
  for (const type of QUANTIZABLE_TYPES) {
    const zeros = new Float32Array(256);
    assert(dequantize(type, quantize(type, zeros), 256).every((v) => v === 0), type.name);
  }
  // Multiples of a power of two within each type's level range survive unchanged when
  // every block (every 16 values for Q6_K) holds the extreme level that sets its scale.
  const exact: Array<[GgmlTypeName, (i: number) => number]> = [
    ["Q8_0", (i) => i % 32 === 0 ? 127 / 64 : (((i * 37) % 255) - 127) / 64],
    ["Q4_0", (i) => i % 32 === 0 ? -2 : (((i * 7) % 16) - 8) / 4],
    ["Q5_0", (i) => i % 32 === 0 ? -4 : (((i * 7) % 32) - 16) / 4],
    ["Q4_1", (i) => i % 32 === 0 ? -1 : i % 32 === 1 ? 0.875 : ((i * 7) % 16) / 8 - 1],
    ["Q6_K", (i) => i % 16 === 0 ? -2 : (((i * 7) % 64) - 32) / 16],
  ];
  for (const [name, value] of exact) {
    const x = Float32Array.from({ length: 256 }, (_, i) => value(i));
    const type = ggmlTypeInfo(GgmlType[name])!;
    assertEquals(Array.from(dequantize(type, quantize(type, x), 256)), Array.from(x), name);
  }
});

Deno.test("quantizeRow rejects partial blocks and short output", () => {
  const code = (fn: () => void) => assertThrows(fn, GgufError).code;
  assertEquals(code(() => quantize(GgmlType.Q4_K, new Float32Array(100))), "gguf_bad_tensor");
  assertEquals(
    code(() => quantizeRow(GgmlType.Q8_0, new Float32Array(32), new Uint8Array(33))),
    "gguf_too_large",
  );
  assertEquals(code(() => quantize(GgmlType.IQ4_NL, new Float32Array(32))), "gguf_unsupported");
});

Deno.test("randomBlocks makes valid, finite, centred blocks of the requested RMS for every type", () => {
  for (const type of DEQUANTIZABLE_TYPES) {
    assert(canRandomize(type), type.name);
    const nBlocks = type.blockSize === 1 ? 8192 : 8192 / type.blockSize * 4;
    for (const rms of [1, 0.02]) {
      const blocks = randomBlocks(type, nBlocks, new Rng(9), rms);
      assertEquals(blocks.byteLength, nBlocks * type.typeSize);
      const v = dequantize(type, blocks, nBlocks * type.blockSize);
      let s = 0, m = 0;
      for (const x of v) {
        if (!Number.isFinite(x)) throw new Error(`${type.name}: non-finite value ${x}`);
        s += x * x;
        m += x;
      }
      const got = Math.sqrt(s / v.length);
      assert(Math.abs(got / rms - 1) < 0.15, `${type.name}: RMS ${got} for ${rms}`);
      assert(Math.abs(m / v.length) < 0.1 * rms, `${type.name}: mean ${m / v.length}`);
    }
  }
});

Deno.test("randomBlocks is reproducible and uses every quant bit", () => {
  for (const type of DEQUANTIZABLE_TYPES) {
    const a = randomBlocks(type, 64, new Rng(1));
    assertEquals(randomBlocks(type, 64, new Rng(1)), a, type.name);
    assertNotEquals(randomBlocks(type, 64, new Rng(2)), a, type.name);
  }
  // Every bit of every Q4_K byte outside the f16 scales is both set and clear somewhere.
  const q4k = ggmlTypeInfo(GgmlType.Q4_K)!;
  const blocks = randomBlocks(q4k, 256, new Rng(4));
  for (let o = 4; o < q4k.typeSize; o++) {
    let or = 0, and = 0xff;
    for (let b = 0; b < 256; b++) {
      or |= blocks[b * q4k.typeSize + o];
      and &= blocks[b * q4k.typeSize + o];
    }
    assertEquals([or, and], [0xff, 0], `byte ${o}`);
  }
});
