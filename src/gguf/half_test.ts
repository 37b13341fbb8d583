import { assert, assertEquals } from "../../tests/support/assert.ts";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "./half.ts";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The f32 whose bits are `bits`. */
function fromBits(bits: number): number {
  u32[0] = bits;
  return f32[0];
}

function bitsOf(x: number): number {
  f32[0] = x;
  return u32[0];
}

Deno.test("f16ToF32 decodes normals, subnormals, zeros, infinities and NaN", () => {
  assertEquals(f16ToF32(0x3c00), 1);
  assertEquals(f16ToF32(0xc000), -2);
  assertEquals(f16ToF32(0x7bff), 65504);
  assertEquals(f16ToF32(0x0001), 2 ** -24);
  assertEquals(f16ToF32(0x0400), 2 ** -14);
  assertEquals(Object.is(f16ToF32(0x8000), -0), true);
  assertEquals(f16ToF32(0x7c00), Infinity);
  assertEquals(f16ToF32(0xfc00), -Infinity);
  assert(Number.isNaN(f16ToF32(0x7e00)));
});

Deno.test("f32ToF16 inverts f16ToF32 for every non-NaN half", () => {
  for (let h = 0; h < 65536; h++) {
    if ((h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0) continue;
    if (f32ToF16(f16ToF32(h)) !== h) {
      throw new Error(`half 0x${h.toString(16)} does not round-trip`);
    }
  }
});

Deno.test("f32ToF16 rounds to nearest, ties to even, at every pair of adjacent halves", () => {
  for (let h = 0; h < 0x7bff; h++) {
    const lo = f16ToF32(h);
    const hi = f16ToF32(h + 1);
    const mid = (lo + hi) / 2; // exact in f32: one bit more than a half's mantissa
    const even = h % 2 === 0 ? h : h + 1;
    if (f32ToF16(mid) !== even) throw new Error(`tie between 0x${h.toString(16)} and next`);
    if (f32ToF16(fromBits(bitsOf(mid) + 1)) !== h + 1) throw new Error(`above tie at ${h}`);
    if (f32ToF16(fromBits(bitsOf(mid) - 1)) !== h) throw new Error(`below tie at ${h}`);
    if (f32ToF16(-mid) !== (even | 0x8000)) throw new Error(`negative tie at ${h}`);
  }
});

Deno.test("f32ToF16 overflows to infinity and underflows to zero like IEEE", () => {
  assertEquals(f32ToF16(65519.99), 0x7bff);
  assertEquals(f32ToF16(65520), 0x7c00);
  assertEquals(f32ToF16(1e10), 0x7c00);
  assertEquals(f32ToF16(-1e10), 0xfc00);
  assertEquals(f32ToF16(2 ** -25), 0); // a tie with 0 and the smallest subnormal: even is 0
  assertEquals(f32ToF16(2 ** -25 * 1.001), 1);
  assertEquals(f32ToF16(2 ** -26), 0);
  assertEquals(f32ToF16(-0), 0x8000);
  assertEquals(f32ToF16(Infinity), 0x7c00);
  assert(Number.isNaN(f16ToF32(f32ToF16(NaN))));
});

Deno.test("bf16 conversions round-trip every non-NaN value and round ties to even", () => {
  for (let b = 0; b < 65536; b++) {
    if ((b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0) continue;
    if (f32ToBf16(bf16ToF32(b)) !== b) {
      throw new Error(`bf16 0x${b.toString(16)} does not round-trip`);
    }
  }
  assertEquals(f32ToBf16(fromBits(0x3f808000)), 0x3f80); // tie, even stays
  assertEquals(f32ToBf16(fromBits(0x3f818000)), 0x3f82); // tie, odd rounds up
  assertEquals(f32ToBf16(fromBits(0x3f808001)), 0x3f81);
  assertEquals(f32ToBf16(fromBits(0x7f800001)), 0x7fc0); // signalling NaN becomes quiet
  assertEquals(bf16ToF32(0x3f80), 1);
});
