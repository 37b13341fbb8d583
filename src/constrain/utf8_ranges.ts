/**
 * Code-point ranges as UTF-8 byte sequences, so that a grammar written over characters
 * runs over bytes: a token that ends in the middle of a character (byte-level BPE splits
 * many) is then matched byte by byte like any other, with no partial-character state.
 * The split is the one regex engines use (Rust's regex-syntax `Utf8Sequences`): ranges are
 * cut where the encoded length changes and where a continuation byte would not span its
 * whole 0x80..0xBF, until each piece is a product of byte ranges.
 */

/** One byte range per position: [lo, hi] pairs, 1 to 4 of them. */
export type ByteRangeSequence = Array<[number, number]>;

/** Largest scalar value; surrogates (0xD800..0xDFFF) are no characters and never encoded. */
export const MAX_CODE_POINT = 0x10ffff;
const SURROGATE_LO = 0xd800;
const SURROGATE_HI = 0xdfff;
const LENGTH_LIMITS = [0x7f, 0x7ff, 0xffff];

export function utf8Encode(cp: number): number[] {
  if (cp < 0x80) return [cp];
  if (cp < 0x800) return [0xc0 | (cp >> 6), 0x80 | (cp & 0x3f)];
  if (cp < 0x10000) return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
  return [
    0xf0 | (cp >> 18),
    0x80 | ((cp >> 12) & 0x3f),
    0x80 | ((cp >> 6) & 0x3f),
    0x80 | (cp & 0x3f),
  ];
}

/** The byte sequences that encode exactly the scalar values in [lo, hi]. */
export function utf8Sequences(lo: number, hi: number): ByteRangeSequence[] {
  const out: ByteRangeSequence[] = [];
  const pieces: Array<[number, number]> = [];
  if (lo <= Math.min(hi, SURROGATE_LO - 1)) pieces.push([lo, Math.min(hi, SURROGATE_LO - 1)]);
  if (Math.max(lo, SURROGATE_HI + 1) <= Math.min(hi, MAX_CODE_POINT)) {
    pieces.push([Math.max(lo, SURROGATE_HI + 1), Math.min(hi, MAX_CODE_POINT)]);
  }
  for (const [a, b] of pieces) split(a, b, out);
  return out;
}

function split(lo: number, hi: number, out: ByteRangeSequence[]): void {
  for (const limit of LENGTH_LIMITS) {
    if (lo <= limit && limit < hi) {
      split(lo, limit, out);
      split(limit + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push([[lo, hi]]);
    return;
  }
  for (let i = 1; i < 4; i++) {
    const m = (1 << (6 * i)) - 1;
    if ((lo & ~m) !== (hi & ~m)) {
      if ((lo & m) !== 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) !== m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const a = utf8Encode(lo), b = utf8Encode(hi);
  out.push(a.map((x, i): [number, number] => [x, b[i]]));
}

/** Sorted, merged ranges; `negate` takes the complement within [1, MAX_CODE_POINT]. */
export function normalizeRanges(
  ranges: ReadonlyArray<readonly [number, number]>,
  negate: boolean,
): Array<[number, number]> {
  const sorted = ranges.map(([a, b]): [number, number] => [a, b]).filter(([a, b]) => a <= b)
    .sort((x, y) => x[0] - y[0]);
  const merged: Array<[number, number]> = [];
  for (const r of sorted) {
    const last = merged.at(-1);
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else merged.push(r);
  }
  if (!negate) return merged;
  // NUL is never a character here, as llama.cpp's NUL-terminated pieces never hold one.
  const out: Array<[number, number]> = [];
  let next = 1;
  for (const [a, b] of merged) {
    if (a > next) out.push([next, a - 1]);
    next = Math.max(next, b + 1);
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}
