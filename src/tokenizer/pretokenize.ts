/**
 * Pre-tokenizers: split text into the "words" BPE runs on. Both are llama.cpp's hand-written
 * state machines for the regex of their family (unicode.cpp, unicode_regex_split_custom_*),
 * which differ only in how many digits a number chunk may hold:
 *
 *   qwen2:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
 *           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   llama3: the same with \p{N}{1,3}
 *
 * A machine over code points is linear, where a backtracking regex is not.
 */

import { codepointFlags, FLAG_LETTER, FLAG_NUMBER, FLAG_WHITESPACE } from "./unicode.ts";

export type PreTokenizerKind = "qwen2" | "llama3";

const CR = 0x0d;
const LF = 0x0a;
const SPACE = 0x20;
const APOSTROPHE = 0x27;

function lowerAscii(cp: number): number {
  return cp >= 0x41 && cp <= 0x5a ? cp | 0x20 : cp;
}

/**
 * Splits `cps[0..n)` into words and appends each word's end index to `ends`.
 * `maxDigits` is 1 for qwen2 and 3 for llama3.
 */
export function splitWords(cps: Int32Array, maxDigits: number, ends: number[]): void {
  const end = cps.length;
  // Flags of an index; 0 past the end of the fragment.
  const flagsAt = (i: number): number => (i < end ? codepointFlags(cps[i]) : 0);
  let pos = 0;
  while (pos < end) {
    const cpt = cps[pos];
    const flags = codepointFlags(cpt);

    if (cpt === APOSTROPHE && pos + 1 < end) {
      const n1 = lowerAscii(cps[pos + 1]);
      if (n1 === 0x73 || n1 === 0x74 || n1 === 0x6d || n1 === 0x64) { // s t m d
        pos += 2;
        ends.push(pos);
        continue;
      }
      if (pos + 2 < end) {
        const n2 = lowerAscii(cps[pos + 2]);
        if (
          (n1 === 0x72 && n2 === 0x65) || (n1 === 0x76 && n2 === 0x65) || // re ve
          (n1 === 0x6c && n2 === 0x6c) // ll
        ) {
          pos += 3;
          ends.push(pos);
          continue;
        }
      }
    }

    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (cpt !== CR && cpt !== LF && (flags & FLAG_NUMBER) === 0) {
      if ((flags & FLAG_LETTER) !== 0 || (flagsAt(pos + 1) & FLAG_LETTER) !== 0) {
        pos++;
        while ((flagsAt(pos) & FLAG_LETTER) !== 0) pos++;
        ends.push(pos);
        continue;
      }
    }

    // \p{N}{1,maxDigits}
    if ((flags & FLAG_NUMBER) !== 0) {
      let start = pos;
      while ((flagsAt(pos) & FLAG_NUMBER) !== 0) {
        pos++;
        if (pos - start >= maxDigits) {
          ends.push(pos);
          start = pos;
        }
      }
      if (pos > start) ends.push(pos);
      continue;
    }

    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'. A lone space at the very end also lands here, as in
    // llama.cpp (the condition tests the current code point, which is in range).
    const OTHER = FLAG_WHITESPACE | FLAG_LETTER | FLAG_NUMBER;
    let flags2 = cpt === SPACE ? flagsAt(pos + 1) : flags;
    if ((flags2 & OTHER) === 0) {
      if (cpt === SPACE) pos++;
      while (pos < end && (flags2 & OTHER) === 0) flags2 = flagsAt(++pos);
      while (pos < end && (cps[pos] === CR || cps[pos] === LF)) pos++;
      ends.push(pos);
      continue;
    }

    let numWhitespace = 0;
    let lastNewlineEnd = 0;
    while ((flagsAt(pos + numWhitespace) & FLAG_WHITESPACE) !== 0) {
      const c = cps[pos + numWhitespace];
      if (c === CR || c === LF) lastNewlineEnd = pos + numWhitespace + 1;
      numWhitespace++;
    }
    // \s*[\r\n]+
    if (lastNewlineEnd > 0) {
      pos = lastNewlineEnd;
      ends.push(pos);
      continue;
    }
    // \s+(?!\S): leave the last space to prefix the next word
    if (numWhitespace > 1 && pos + numWhitespace < end) {
      pos += numWhitespace - 1;
      ends.push(pos);
      continue;
    }
    if (numWhitespace > 0) {
      pos += numWhitespace;
      ends.push(pos);
      continue;
    }
    pos++;
    ends.push(pos);
  }
}
