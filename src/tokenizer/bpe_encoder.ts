/**
 * Byte-level BPE of raw text (no special tokens in it), as llama.cpp's
 * llm_tokenizer_bpe_session does it: the pre-tokenizer splits the text into words, each
 * word's UTF-8 bytes become GPT-2 byte symbols and are merged by rank. No Unicode
 * normalization is applied (llama.cpp applies none).
 */

import { BpeScratch, mergeWord } from "./bpe.ts";
import { MergeTable } from "./merges.ts";
import { splitWords } from "./pretokenize.ts";
import {
  BYTE_TO_CODEPOINT,
  codepointFlags,
  FLAG_WHITESPACE,
  toCodepoints,
  writeUtf8,
} from "./unicode.ts";
import type { PreTokenizerConfig } from "./vocab.ts";

const WORD_CACHE_LIMIT = 1 << 16;
/**
 * Words ending this close to a window's end may change once the text after it is seen
 * (the pre-tokenizer looks a few code points ahead): they are left to the next window.
 */
const WINDOW_MARGIN = 16;
const CACHEABLE_WORD = 256;

export class BpeEncoder {
  readonly #idOf: ReadonlyMap<string, number>;
  readonly #pre: PreTokenizerConfig;
  readonly #merges: MergeTable;
  readonly #maxDigits: number;
  readonly #scratch = new BpeScratch();
  readonly #wordCache = new Map<string, readonly number[]>();
  #wordBytes = new Uint8Array(256);

  constructor(
    idOf: ReadonlyMap<string, number>,
    size: number,
    pre: PreTokenizerConfig,
    merges: readonly string[],
  ) {
    this.#idOf = idOf;
    this.#pre = pre;
    this.#merges = new MergeTable(idOf, size, merges);
    this.#maxDigits = pre.kind === "qwen2" ? 1 : 3;
  }

  /**
   * Pre-tokenizes and encodes `text` a window (in code units) at a time, pausing after each.
   * A window ends after a code point that is not whitespace (so every whitespace run in it
   * is whole) and keeps only the words that end well before its end: those the
   * pre-tokenizer decides the same with or without the text after them. The next window
   * starts where the last kept word ended.
   */
  *encode(text: string, out: number[], window: number): Generator<void> {
    let from = 0;
    let size = window;
    while (from < text.length) {
      const { cps, offsets } = toCodepoints(text.slice(from, from + size));
      const last = from + size >= text.length;
      let end = cps.length;
      if (!last) {
        while (end > 0 && (codepointFlags(cps[end - 1]) & FLAG_WHITESPACE) !== 0) end--;
      }
      const ends: number[] = [];
      splitWords(cps.subarray(0, end), this.#maxDigits, ends);
      let kept = ends.length;
      if (!last) { while (kept > 0 && ends[kept - 1] > end - WINDOW_MARGIN) kept--; }
      if (kept === 0) {
        // One word (or whitespace run) longer than the window: look further.
        size *= 2;
        continue;
      }
      const slice = text.slice(from, from + offsets[ends[kept - 1]]);
      let start = 0;
      for (let w = 0; w < kept; w++) {
        const wordEnd = ends[w];
        const word = slice.slice(offsets[start], offsets[wordEnd]);
        let ids = this.#wordCache.get(word);
        if (ids === undefined) {
          ids = this.#encodeWord(cps, start, wordEnd);
          if (word.length <= CACHEABLE_WORD) {
            if (this.#wordCache.size >= WORD_CACHE_LIMIT) this.#wordCache.clear();
            this.#wordCache.set(word, ids);
          }
        }
        for (let i = 0; i < ids.length; i++) out.push(ids[i]);
        start = wordEnd;
      }
      from += offsets[ends[kept - 1]];
      size = window;
      yield;
    }
  }

  #encodeWord(cps: Int32Array, start: number, end: number): number[] {
    const maxBytes = 4 * (end - start);
    if (this.#wordBytes.length < maxBytes) this.#wordBytes = new Uint8Array(maxBytes * 2);
    const bytes = this.#wordBytes;
    let n = 0;
    for (let i = start; i < end; i++) n = writeUtf8(cps[i], bytes, n);

    const merges = this.#merges;
    if (this.#pre.ignoreMerges) {
      let mapped = "";
      for (let i = 0; i < n; i++) mapped += String.fromCharCode(BYTE_TO_CODEPOINT[bytes[i]]);
      const whole = this.#idOf.get(mapped);
      if (whole !== undefined) return [whole];
    }
    const s = this.#scratch;
    s.ensure(n);
    for (let i = 0; i < n; i++) s.ids[i] = merges.byteIds[bytes[i]];
    const symbols = mergeWord(merges, s, n);
    if (symbols.every((id) => id < merges.vocabSize)) return symbols;
    return symbols.flatMap((id) => id < merges.vocabSize ? [id] : merges.fallbackIds(id));
  }
}
