/**
 * The Unicode facts the pre-tokenizers need, defined the way llama.cpp's unicode.cpp does:
 * letters are general category L*, numbers N* (both as of Unicode 15.1, see
 * unicode_data.ts), whitespace is the White_Space property (so U+0085 counts and U+FEFF
 * does not, unlike JavaScript's `\s`).
 */

import { LETTER_RANGES, NUMBER_RANGES } from "./unicode_data.ts";

export const FLAG_LETTER = 1;
export const FLAG_NUMBER = 2;
export const FLAG_WHITESPACE = 4;

const MAX_CODEPOINT = 0x10ffff;

// The White_Space property (PropList.txt), which llama.cpp lists by hand.
const WHITESPACE = [
  0x09,
  0x0a,
  0x0b,
  0x0c,
  0x0d,
  0x20,
  0x85,
  0xa0,
  0x1680,
  0x2000,
  0x2001,
  0x2002,
  0x2003,
  0x2004,
  0x2005,
  0x2006,
  0x2007,
  0x2008,
  0x2009,
  0x200a,
  0x2028,
  0x2029,
  0x202f,
  0x205f,
  0x3000,
];

const FLAGS: Uint8Array = (() => {
  const table = new Uint8Array(MAX_CODEPOINT + 1);
  const mark = (ranges: string, flag: number): void => {
    for (const item of ranges.split(" ")) {
      const [first, last = first] = item.split("-");
      const start = parseInt(first, 16);
      const end = parseInt(last, 16);
      for (let cp = start; cp <= end; cp++) table[cp] |= flag;
    }
  };
  mark(LETTER_RANGES, FLAG_LETTER);
  mark(NUMBER_RANGES, FLAG_NUMBER);
  for (const cp of WHITESPACE) table[cp] |= FLAG_WHITESPACE;
  return table;
})();

/** Letter / number / whitespace flags of a code point (0..0x10FFFF); 0 for anything else. */
export function codepointFlags(cp: number): number {
  return FLAGS[cp];
}

/**
 * GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68
 * bytes are shifted to U+0100.. in byte order, so every byte is one visible character.
 */
export const BYTE_TO_CODEPOINT: Uint16Array = (() => {
  const table = new Uint16Array(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) ||
      (b >= 0xae && b <= 0xff);
    table[b] = printable ? b : 256 + shifted++;
  }
  return table;
})();

/** Inverse of BYTE_TO_CODEPOINT: code point -> byte, -1 where the code point is no byte. */
export const CODEPOINT_TO_BYTE: Int16Array = (() => {
  const table = new Int16Array(324).fill(-1);
  for (let b = 0; b < 256; b++) table[BYTE_TO_CODEPOINT[b]] = b;
  return table;
})();

/**
 * Decodes a JavaScript string into code points and the UTF-16 offset of each (plus a final
 * entry for the end). Lone surrogates become U+FFFD, as UTF-8 encoding would make them.
 */
export function toCodepoints(text: string): { cps: Int32Array; offsets: Int32Array } {
  const n = text.length;
  const cps = new Int32Array(n);
  const offsets = new Int32Array(n + 1);
  let count = 0;
  for (let i = 0; i < n; i++) {
    let cp = text.charCodeAt(i);
    offsets[count] = i;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      const next = i + 1 < n ? text.charCodeAt(i + 1) : 0;
      if (cp <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (next - 0xdc00);
        i++;
      } else {
        cp = 0xfffd;
      }
    }
    cps[count++] = cp;
  }
  offsets[count] = n;
  return { cps: cps.subarray(0, count), offsets: offsets.subarray(0, count + 1) };
}

/** Appends the UTF-8 bytes of `cp` to `out` at `at`; returns the new length. */
export function writeUtf8(cp: number, out: Uint8Array, at: number): number {
  if (cp < 0x80) {
    out[at] = cp;
    return at + 1;
  }
  if (cp < 0x800) {
    out[at] = 0xc0 | (cp >> 6);
    out[at + 1] = 0x80 | (cp & 0x3f);
    return at + 2;
  }
  if (cp < 0x10000) {
    out[at] = 0xe0 | (cp >> 12);
    out[at + 1] = 0x80 | ((cp >> 6) & 0x3f);
    out[at + 2] = 0x80 | (cp & 0x3f);
    return at + 3;
  }
  out[at] = 0xf0 | (cp >> 18);
  out[at + 1] = 0x80 | ((cp >> 12) & 0x3f);
  out[at + 2] = 0x80 | ((cp >> 6) & 0x3f);
  out[at + 3] = 0x80 | (cp & 0x3f);
  return at + 4;
}

/** Bytes of `text` in UTF-8 (lone surrogates count as U+FFFD's 3), without encoding it. */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else {
        bytes += 3;
      }
    } else bytes += 3;
  }
  return bytes;
}
