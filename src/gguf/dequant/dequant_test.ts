import { assert, assertEquals, assertThrows } from "../../../tests/support/assert.ts";
import { GgufError } from "../errors.ts";
import { f16ToF32, f32ToF16 } from "../half.ts";
import { randomBlocks } from "../quant/random.ts";
import { Rng } from "../rng.ts";
import { GgmlType, ggmlTypeInfo } from "../types.ts";
import { canDequantize, DEQUANTIZABLE_TYPES, dequantize, dequantizeRow } from "./mod.ts";

/*
 * A second reading of the block formats, element by element (the way gguf-py's numpy
 * dequantizers index them) rather than ggml's loop nest: value e of a block from the
 * struct fields alone. The loop-nest dequantizers must agree with it bit for bit.
 */

const f = Math.fround;
const half = (b: Uint8Array, o: number) => f16ToF32(b[o] | (b[o + 1] << 8));
const int8 = (v: number) => (v << 24) >> 24;
const nibble = (b: Uint8Array, qs: number, e: number) =>
  e < 16 ? b[qs + e] & 0xf : b[qs + e - 16] >> 4;
const bit = (b: Uint8Array, o: number, i: number) => (b[o + (i >> 3)] >> (i & 7)) & 1;

function k4ScaleMin(b: Uint8Array, s: number, j: number): [number, number] {
  if (j < 4) return [b[s + j] & 63, b[s + j + 4] & 63];
  return [
    (b[s + j + 4] & 0xf) | ((b[s + j - 4] >> 6) << 4),
    (b[s + j + 4] >> 4) | ((b[s + j] >> 6) << 4),
  ];
}

const ELEMENT: Partial<Record<number, (b: Uint8Array, e: number) => number>> = {
  [GgmlType.BF16]: (b, e) =>
    new Float32Array(new Uint32Array([(b[2 * e] | (b[2 * e + 1] << 8)) << 16]).buffer)[0],
  [GgmlType.Q4_0]: (b, e) => (nibble(b, 2, e) - 8) * half(b, 0),
  [GgmlType.Q4_1]: (b, e) => f(nibble(b, 4, e) * half(b, 0)) + half(b, 2),
  [GgmlType.Q5_0]: (b, e) => ((nibble(b, 6, e) | (bit(b, 2, e) << 4)) - 16) * half(b, 0),
  [GgmlType.Q5_1]: (b, e) => f((nibble(b, 8, e) | (bit(b, 4, e) << 4)) * half(b, 0)) + half(b, 2),
  [GgmlType.Q8_0]: (b, e) => int8(b[2 + e]) * half(b, 0),
  [GgmlType.Q2_K]: (b, e) => {
    // e = 128 * h + 32 * s + k: bits 2s..2s+1 of qs[32h + k]; sub-block e / 16.
    const h = e >> 7, s = (e >> 5) & 3, k = e & 31;
    const q = (b[16 + 32 * h + k] >> (2 * s)) & 3;
    const sc = b[e >> 4];
    return f(f(half(b, 80) * (sc & 0xf)) * q) - f(half(b, 82) * (sc >> 4));
  },
  [GgmlType.Q3_K]: (b, e) => {
    const h = e >> 7, s = (e >> 5) & 3, k = e & 31;
    const low = (b[32 + 32 * h + k] >> (2 * s)) & 3;
    const high = (b[e & 31] >> (e >> 5)) & 1; // hmask bit e / 32 of byte e % 32
    const j = e >> 4;
    const sl = j < 8 ? b[96 + j] & 0xf : b[96 + j - 8] >> 4;
    const sh = (b[96 + 8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return f(half(b, 108) * ((sl | (sh << 4)) - 32)) * (low - (high ? 0 : 4));
  },
  [GgmlType.Q4_K]: (b, e) => {
    // e = 64 * g + 32 * h + k: nibble h of qs[32g + k]; sub-block e / 32.
    const g = e >> 6, h = (e >> 5) & 1, k = e & 31;
    const q = (b[16 + 32 * g + k] >> (4 * h)) & 0xf;
    const [sc, m] = k4ScaleMin(b, 4, e >> 5);
    return f(f(half(b, 0) * sc) * q) - f(half(b, 2) * m);
  },
  [GgmlType.Q5_K]: (b, e) => {
    const g = e >> 6, h = (e >> 5) & 1, k = e & 31;
    const q = ((b[48 + 32 * g + k] >> (4 * h)) & 0xf) | (((b[16 + k] >> (e >> 5)) & 1) << 4);
    const [sc, m] = k4ScaleMin(b, 4, e >> 5);
    return f(f(half(b, 0) * sc) * q) - f(half(b, 2) * m);
  },
  [GgmlType.Q6_K]: (b, e) => {
    // e = 128 * h + 64 * n + k (k < 64): nibble n of ql[64h + k]; the high 2 bits are
    // bits 2s..2s+1 of qh[32h + e % 32] with s = (e % 128) / 32.
    const h = e >> 7, n = (e >> 6) & 1, k = e & 63, s = (e >> 5) & 3;
    const low = (b[64 * h + k] >> (4 * n)) & 0xf;
    const high = (b[128 + 32 * h + (e & 31)] >> (2 * s)) & 3;
    return f(half(b, 208) * int8(b[192 + (e >> 4)])) * ((low | (high << 4)) - 32);
  },
};

Deno.test("every block type's dequantizer matches an element-wise reading of its format", () => {
  const rng = new Rng(11);
  for (const type of DEQUANTIZABLE_TYPES) {
    const element = ELEMENT[type.id];
    if (element === undefined) continue; // F32 and F16 are plain arrays
    const nBlocks = 64;
    const blocks = randomBlocks(type, nBlocks, rng);
    const values = dequantize(type, blocks, nBlocks * type.blockSize);
    for (let i = 0; i < nBlocks; i++) {
      const block = blocks.subarray(i * type.typeSize, (i + 1) * type.typeSize);
      for (let e = 0; e < type.blockSize; e++) {
        const want = element(type.blockSize === 1 ? blocks : block, type.blockSize === 1 ? i : e);
        const got = values[i * type.blockSize + e];
        if (!Object.is(got, want)) {
          throw new Error(`${type.name} block ${i} value ${e}: ${got} != ${want}`);
        }
      }
    }
  }
});

Deno.test("dequantizers cover every type the backends must load", () => {
  const names = DEQUANTIZABLE_TYPES.map((t) => t.name).sort();
  assertEquals(
    names,
    [
      "BF16",
      "F16",
      "F32",
      "Q2_K",
      "Q3_K",
      "Q4_0",
      "Q4_1",
      "Q4_K",
      "Q5_0",
      "Q5_1",
      "Q5_K",
      "Q6_K",
      "Q8_0",
    ],
  );
  assert(!canDequantize(GgmlType.IQ2_XXS));
});

Deno.test("F32 and F16 dequantize as plain little-endian arrays", () => {
  const f32 = new Float32Array([1.5, -2, 3.25]);
  assertEquals(Array.from(dequantize(GgmlType.F32, new Uint8Array(f32.buffer), 3)), [
    1.5,
    -2,
    3.25,
  ]);
  const halves = [f32ToF16(0.5), f32ToF16(-65504), f32ToF16(2 ** -24)];
  const bytes = new Uint8Array(halves.flatMap((h) => [h & 0xff, h >> 8]));
  assertEquals(Array.from(dequantize(GgmlType.F16, bytes, 3)), [0.5, -65504, 2 ** -24]);
});

Deno.test("dequantizeRow rejects partial blocks, short input and types it cannot decode", () => {
  const q8 = ggmlTypeInfo(GgmlType.Q8_0)!;
  const bad = (fn: () => void, code: string) =>
    assertEquals(assertThrows(fn, GgufError).code, code);
  bad(() => dequantizeRow(q8, new Uint8Array(34), new Float32Array(16)), "gguf_bad_tensor");
  bad(() => dequantizeRow(q8, new Uint8Array(33), new Float32Array(32)), "gguf_truncated");
  bad(() => dequantize(GgmlType.IQ2_XXS, new Uint8Array(66), 256), "gguf_unsupported");
  bad(() => dequantize(4, new Uint8Array(64), 32), "gguf_unknown_tensor_type");
});
