/**
 * IEEE half (f16) and bfloat16 conversions, bit-exact with ggml: f16 -> f32 is exact,
 * f32 -> f16 rounds to nearest even (as F16C's `vcvtps2ph` and ggml's fallback do), and
 * f32 -> bf16 rounds to nearest even with NaN forced quiet (`ggml_compute_fp32_to_bf16`).
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Every f16 bit pattern as f32: the dequantizers read scales through this table. */
export const F16_TABLE: Float32Array = (() => {
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) table[h] = f16BitsToF32(h);
  return table;
})();

/** The f32 value of the f16 with bits `h`. */
export function f16ToF32(h: number): number {
  return F16_TABLE[h & 0xffff];
}

/** The f16 bits nearest to `x` (ties to even); overflow gives infinity, NaN stays NaN. */
export function f32ToF16(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  // Unbiased exponent e maps to f16 exponent e + 15; below 1 the value is subnormal.
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal (or zero): shift the mantissa, with its implicit bit, right by 14 - e.
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = m & ((1 << shift) - 1);
    let h = m >>> shift;
    if (rest > half || (rest === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // Rounding up may carry into the exponent, which is exactly the right result (up to inf).
  if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
  return sign | h;
}

/** The f32 value of the bf16 with bits `b`. */
export function bf16ToF32(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0];
}

/** The bf16 bits nearest to `x` (ties to even); NaN becomes a quiet NaN. */
export function f32ToBf16(x: number): number {
  f32[0] = x;
  const bits = u32[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 64) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}
