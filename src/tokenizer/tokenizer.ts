/**
 * Byte-level BPE tokenizer built from GGUF metadata, token for token what llama.cpp's
 * llama_tokenize / llama_detokenize produce: special tokens are cut out first, the rest is
 * split into words by the pre-tokenizer, each word's UTF-8 bytes become GPT-2 byte symbols
 * and are merged by rank. No Unicode normalization is applied (llama.cpp applies none).
 */

import type { GgufFile } from "../gguf/mod.ts";
import { BpeScratch, mergeWord } from "./bpe.ts";
import { TokenizerError } from "./errors.ts";
import { MergeTable } from "./merges.ts";
import { splitWords } from "./pretokenize.ts";
import { partitionSpecial } from "./special.ts";
import {
  BYTE_TO_CODEPOINT,
  CODEPOINT_TO_BYTE,
  codepointFlags,
  FLAG_WHITESPACE,
  toCodepoints,
  writeUtf8,
} from "./unicode.ts";
import {
  ATTR_BYTE,
  ATTR_CONTROL,
  ATTR_NORMAL,
  ATTR_UNKNOWN,
  ATTR_USER_DEFINED,
  readVocab,
  type Vocab,
} from "./vocab.ts";

export interface EncodeOptions {
  /** Match control tokens written in the text (`<|im_start|>`); default false. */
  parseSpecial?: boolean;
  /** Add BOS/EOS where the vocabulary asks for them (llama.cpp's add_special); default false. */
  addSpecial?: boolean;
}

export interface DecodeOptions {
  /** Drop control tokens (and an added BOS/EOS) instead of rendering their text. */
  skipSpecial?: boolean;
}

const WORD_CACHE_LIMIT = 1 << 16;
/** Code units of text pre-tokenized at a time (see #encodeText). */
const WINDOW = 16384;
/**
 * Words ending this close to a window's end may change once the text after it is seen
 * (the pre-tokenizer looks a few code points ahead): they are left to the next window.
 */
const WINDOW_MARGIN = 16;
const CACHEABLE_WORD = 256;
const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

export class Tokenizer {
  readonly #vocab: Vocab;
  readonly #merges: MergeTable;
  readonly #maxDigits: number;
  readonly #scratch = new BpeScratch();
  readonly #wordCache = new Map<string, readonly number[]>();
  readonly #pieces: (Uint8Array | undefined)[];
  #wordBytes = new Uint8Array(256);
  #maxTokenBytes: number | undefined;

  constructor(vocab: Vocab) {
    this.#vocab = vocab;
    this.#merges = new MergeTable(vocab.idOf, vocab.texts.length, vocab.merges);
    this.#maxDigits = vocab.pre.kind === "qwen2" ? 1 : 3;
    this.#pieces = new Array(vocab.texts.length);
  }

  /** Number of tokens in the vocabulary. */
  get size(): number {
    return this.#vocab.texts.length;
  }

  get bosId(): number | null {
    return this.#vocab.bosId;
  }

  get eosId(): number | null {
    return this.#vocab.eosId;
  }

  /** Tokens that end generation, as llama.cpp's llama_vocab_is_eog decides. */
  get eogIds(): ReadonlySet<number> {
    return this.#vocab.eogIds;
  }

  isEog(id: number): boolean {
    return this.#vocab.eogIds.has(id);
  }

  /** Whether `id` is a control token (`<|im_start|>`, BOS...): no text unless asked. */
  isControl(id: number): boolean {
    this.#check(id);
    return (this.#vocab.attrs[id] & ATTR_CONTROL) !== 0;
  }

  /** The id of the token whose vocabulary text is exactly `text`. */
  tokenId(text: string): number | undefined {
    return this.#vocab.idOf.get(text);
  }

  /** The vocabulary text of a token (byte-level symbols, not decoded). */
  tokenText(id: number): string {
    this.#check(id);
    return this.#vocab.texts[id];
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    const slices = this.encodeInSlices(text, options);
    for (;;) {
      const next = slices.next();
      if (next.done) return next.value;
    }
  }

  /**
   * `encode`, a window of the text at a time: it pauses (yields) after each window, so a
   * long prompt can be tokenized between other work. The ids are the same as encode's,
   * whatever `window` (in code units) is.
   */
  *encodeInSlices(
    text: string,
    options: EncodeOptions = {},
    window = WINDOW,
  ): Generator<void, number[]> {
    const vocab = this.#vocab;
    const out: number[] = [];
    if (options.addSpecial && vocab.addBos && vocab.bosId !== null) out.push(vocab.bosId);
    if (text.length > 0) {
      for (const fragment of partitionSpecial(text, vocab, options.parseSpecial ?? false)) {
        if (typeof fragment === "number") out.push(fragment);
        else yield* this.#encodeText(fragment, out, window);
      }
    }
    if (options.addSpecial && vocab.addEos && vocab.eosId !== null) out.push(vocab.eosId);
    return out;
  }

  /** The most bytes any one token stands for: a text of n bytes has at least n / this tokens. */
  get maxTokenBytes(): number {
    this.#maxTokenBytes ??= this.#vocab.texts.reduce(
      (most, _, id) => Math.max(most, this.tokenBytes(id, true).length),
      1,
    );
    return this.#maxTokenBytes;
  }

  /** Decodes ids to text; invalid UTF-8 becomes U+FFFD. */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const vocab = this.#vocab;
    const skip = options.skipSpecial ?? false;
    let first = 0;
    let last = ids.length;
    if (skip && vocab.addBos && last > 0 && ids[0] === vocab.bosId) first++;
    if (skip && vocab.addEos && last > first && ids[last - 1] === vocab.eosId) last--;
    const parts: Uint8Array[] = [];
    let total = 0;
    for (let i = first; i < last; i++) {
      const piece = this.tokenBytes(ids[i], !skip);
      parts.push(piece);
      total += piece.length;
    }
    let bytes: Uint8Array = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.length;
    }
    if (vocab.pre.cleanSpaces) bytes = cleanSpaces(bytes);
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
  }

  /**
   * The bytes a token stands for (llama_token_to_piece): control and unknown tokens render
   * their text only when `special`, user-defined tokens always, unused tokens never.
   * The array is cached and shared: read it, do not modify it.
   */
  tokenBytes(id: number, special: boolean): Uint8Array {
    this.#check(id);
    const attr = this.#vocab.attrs[id];
    if ((attr & (ATTR_CONTROL | ATTR_UNKNOWN)) !== 0 && !special) return EMPTY;
    let piece = this.#pieces[id];
    if (piece === undefined) {
      piece = this.#pieceOf(id, attr);
      this.#pieces[id] = piece;
    }
    return piece;
  }

  #check(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.#vocab.texts.length) {
      throw new TokenizerError(
        "tokenizer_bad_token_id",
        `token id ${id} is outside the vocabulary (0..${this.#vocab.texts.length - 1})`,
      );
    }
  }

  #pieceOf(id: number, attr: number): Uint8Array {
    const text = this.#vocab.texts[id];
    if ((attr & (ATTR_CONTROL | ATTR_UNKNOWN | ATTR_USER_DEFINED)) !== 0) return utf8.encode(text);
    if ((attr & ATTR_NORMAL) !== 0) return byteLevelDecode(text);
    if ((attr & ATTR_BYTE) !== 0) return Uint8Array.of(parseInt(text.slice(3, 5), 16));
    return EMPTY;
  }

  /**
   * Pre-tokenizes and encodes `text` a window at a time. A window ends after a code point
   * that is not whitespace (so every whitespace run in it is whole) and keeps only the words
   * that end well before its end: those the pre-tokenizer decides the same with or without
   * the text after them. The next window starts where the last kept word ended.
   */
  *#encodeText(text: string, out: number[], window: number): Generator<void> {
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
    if (this.#vocab.pre.ignoreMerges) {
      let mapped = "";
      for (let i = 0; i < n; i++) mapped += String.fromCharCode(BYTE_TO_CODEPOINT[bytes[i]]);
      const whole = this.#vocab.idOf.get(mapped);
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

/** Builds the tokenizer of a GGUF file from its metadata. */
export function loadTokenizer(file: GgufFile): Tokenizer {
  return new Tokenizer(readVocab(file));
}

/**
 * Maps a normal token's GPT-2 characters back to bytes (llama_decode_text). A character
 * outside the byte alphabet becomes llama.cpp's "[UNK_BYTE_0x..]" marker.
 */
function byteLevelDecode(text: string): Uint8Array {
  const out: number[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    const byte = cp < CODEPOINT_TO_BYTE.length ? CODEPOINT_TO_BYTE[cp] : -1;
    if (byte >= 0) {
      out.push(byte);
      continue;
    }
    const hex = Array.from(utf8.encode(ch), (b) => b.toString(16).padStart(2, "0")).join("");
    out.push(...utf8.encode(`[UNK_BYTE_0x${hex}${text}]`));
  }
  return Uint8Array.from(out);
}

/**
 * llama.cpp's clean_spaces passes over detokenized bytes, compacting in place as it does:
 * drop the space before ?!., turn " ' " into "'", drop the space before 's 'm 're 've.
 */
function cleanSpaces(bytes: Uint8Array): Uint8Array {
  const SPACE = 0x20;
  const QUOTE = 0x27;
  const t = bytes;
  const n1 = t.length;
  let total = n1 > 0 ? 1 : 0;
  for (let i = 1; i < n1; i++) {
    const x = t[i];
    if (t[i - 1] === SPACE && (x === 0x3f || x === 0x21 || x === 0x2e || x === 0x2c)) total--;
    t[total++] = x;
  }
  const n2 = total;
  total = n2 > 0 ? 1 : 0;
  for (let i = 1; i < n2; i++) {
    const x = t[i];
    if (x === QUOTE && i + 1 < n2 && t[i - 1] === SPACE && t[i + 1] === SPACE) {
      total--;
      t[++i] = 0;
    }
    t[total++] = x;
  }
  const n3 = total;
  total = n3 > 0 ? 1 : 0;
  for (let i = 1; i < n3; i++) {
    const x = t[i];
    if (t[i - 1] === SPACE && x === QUOTE && i + 1 < n3) {
      const x1 = t[i + 1];
      if (x1 === 0x73 || x1 === 0x6d) total--; // 's 'm
      else if (i + 2 < n3 && (x1 === 0x72 || x1 === 0x76) && t[i + 2] === 0x65) total--; // 're 've
    }
    t[total++] = x;
  }
  return t.subarray(0, total);
}
