/**
 * Byte layouts of ggml's quantized blocks (ggml-common.h), shared by the dequantizers,
 * the quantizers and the random block generator. Every multi-byte field is little-endian;
 * `ggml_half` is an f16.
 */

/** Values per block of the legacy types. */
export const QK = 32;
/** Values per super-block of the k-quants. */
export const QK_K = 256;

/** block_q4_0 { half d; u8 qs[16] }: value = (nibble - 8) * d. */
export const Q4_0 = { size: 18, d: 0, qs: 2 } as const;
/** block_q4_1 { half d; half m; u8 qs[16] }: value = nibble * d + m. */
export const Q4_1 = { size: 20, d: 0, m: 2, qs: 4 } as const;
/** block_q5_0 { half d; u8 qh[4]; u8 qs[16] }: value = (5-bit q - 16) * d. */
export const Q5_0 = { size: 22, d: 0, qh: 2, qs: 6 } as const;
/** block_q5_1 { half d; half m; u8 qh[4]; u8 qs[16] }: value = 5-bit q * d + m. */
export const Q5_1 = { size: 24, d: 0, m: 2, qh: 4, qs: 8 } as const;
/** block_q8_0 { half d; i8 qs[32] }: value = q * d. */
export const Q8_0 = { size: 34, d: 0, qs: 2 } as const;

/** block_q2_K { u8 scales[16] (4-bit scale | 4-bit min << 4); u8 qs[64]; half d; half dmin }. */
export const Q2_K = { size: 84, scales: 0, qs: 16, d: 80, dmin: 82 } as const;
/** block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12] (16 x 6 bits); half d }. */
export const Q3_K = { size: 110, hmask: 0, qs: 32, scales: 96, d: 108 } as const;
/** block_q4_K { half d; half dmin; u8 scales[12] (8 x 6-bit scale and min); u8 qs[128] }. */
export const Q4_K = { size: 144, d: 0, dmin: 2, scales: 4, qs: 16 } as const;
/** block_q5_K { half d; half dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }. */
export const Q5_K = { size: 176, d: 0, dmin: 2, scales: 4, qh: 16, qs: 48 } as const;
/** block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; half d }. */
export const Q6_K = { size: 210, ql: 0, qh: 128, scales: 192, d: 208 } as const;

/** Reads the little-endian u16 at `o` (an f16's bits). */
export function u16At(b: Uint8Array, o: number): number {
  return b[o] | (b[o + 1] << 8);
}

/** Writes `v` as a little-endian u16 at `o`. */
export function setU16(b: Uint8Array, o: number, v: number): void {
  b[o] = v & 0xff;
  b[o + 1] = (v >>> 8) & 0xff;
}

/**
 * Scale and min `j` (0..7) of a Q4_K/Q5_K block, packed 6 bits each in 12 bytes:
 * j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split between the nibbles of
 * byte j + 4 and the top 2 bits of bytes j - 4 and j (ggml's `get_scale_min_k4`).
 */
export function scaleMinK4(b: Uint8Array, scales: number, j: number): [number, number] {
  const q = (i: number) => b[scales + i];
  if (j < 4) return [q(j) & 63, q(j + 4) & 63];
  return [(q(j + 4) & 0xf) | ((q(j - 4) >> 6) << 4), (q(j + 4) >> 4) | ((q(j) >> 6) << 4)];
}
