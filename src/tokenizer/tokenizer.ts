/**
 * The tokenizer of a GGUF file, token for token what llama.cpp's llama_tokenize /
 * llama_detokenize produce: special tokens are cut out of the text first, then each raw
 * piece is encoded by the vocabulary's model, byte-level BPE (bpe_encoder.ts) or
 * SentencePiece-style merging (spm.ts).
 */

import type { GgufFile } from "../gguf/mod.ts";
import { BpeEncoder } from "./bpe_encoder.ts";
import { TokenizerError } from "./errors.ts";
import { cleanSpaces, renderPiece } from "./pieces.ts";
import { SpecialSplitter } from "./special.ts";
import { SpmMerger } from "./spm.ts";
import { ATTR_CONTROL, ATTR_UNKNOWN, readVocab, type Vocab } from "./vocab.ts";

export interface EncodeOptions {
  /** Match control tokens written in the text (`<|im_start|>`); default false. */
  parseSpecial?: boolean;
  /** Add BOS/EOS where the vocabulary asks for them (llama.cpp's add_special); default false. */
  addSpecial?: boolean;
}

export interface DecodeOptions {
  /** Shorthand: drop an added BOS/EOS and render control tokens as nothing. */
  skipSpecial?: boolean;
  /** llama.cpp's remove_special: drop a leading BOS and trailing EOS the vocabulary adds. */
  removeSpecial?: boolean;
  /** llama.cpp's unparse_special: render control and unknown tokens' text. */
  unparseSpecial?: boolean;
}

/** Work done between two pauses of encodeInSlices: code units (BPE), merge steps (SPM). */
const WINDOW = 16384;
const EMPTY = new Uint8Array(0);
const SPM_SPACE = "\u2581";

export class Tokenizer {
  readonly #vocab: Vocab;
  readonly #bpe: BpeEncoder | undefined;
  readonly #spm: SpmMerger | undefined;
  readonly #specials: SpecialSplitter;
  readonly #pieces: (Uint8Array | undefined)[];
  #maxTokenBytes: number | undefined;

  constructor(vocab: Vocab) {
    this.#vocab = vocab;
    const model = vocab.model;
    if (model.kind === "bpe") {
      this.#bpe = new BpeEncoder(vocab.idOf, vocab.texts.length, model.pre, model.merges);
    } else {
      this.#spm = new SpmMerger({ idOf: vocab.idOf, scores: model.scores, byteIds: model.byteIds });
    }
    this.#specials = new SpecialSplitter(vocab);
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

  /** The vocabulary text of a token (byte-level symbols or `▁` spaces, not decoded). */
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
   * `encode`, a bounded amount of work at a time: it pauses (yields) after each `window`
   * code units (BPE) or merge steps (SPM) and after each piece between special tokens, so a
   * long prompt can be tokenized between other work. The ids are the same as encode's,
   * whatever `window` is.
   */
  *encodeInSlices(
    text: string,
    options: EncodeOptions = {},
    window = WINDOW,
  ): Generator<void, number[]> {
    const vocab = this.#vocab;
    const out: number[] = [];
    if (options.addSpecial && vocab.addBos && vocab.bosId !== null) out.push(vocab.bosId);
    // llama.cpp sees UTF-8, where a lone surrogate can only have become U+FFFD.
    const fragments = text.length === 0
      ? []
      : this.#specials.split(text.toWellFormed(), options.parseSpecial ?? false);
    let afterSpecial = true;
    for (const fragment of fragments) {
      if (typeof fragment === "number") {
        out.push(fragment);
        afterSpecial = true;
      } else if (this.#spm !== undefined) {
        const spaced = vocab.addSpacePrefix && afterSpecial ? " " + fragment : fragment;
        yield* this.#spm.merge(spaced.replaceAll(" ", SPM_SPACE), out, window);
        afterSpecial = false;
        yield;
      } else {
        yield* this.#bpe!.encode(fragment, out, window);
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

  /**
   * Decodes ids to text as llama_detokenize does; invalid UTF-8 becomes U+FFFD. Where the
   * vocabulary prefixes a space when encoding, the first piece loses one leading space
   * (unless a BOS was removed before it).
   */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const vocab = this.#vocab;
    const skip = options.skipSpecial ?? false;
    const removeSpecial = options.removeSpecial ?? skip;
    const unparseSpecial = options.unparseSpecial ?? !skip;
    let removeSpace = vocab.addSpacePrefix;
    let first = 0;
    let last = ids.length;
    if (removeSpecial && vocab.addBos && last > 0 && ids[0] === vocab.bosId) {
      first++;
      removeSpace = false;
    }
    if (removeSpecial && vocab.addEos && last > first && ids[last - 1] === vocab.eosId) last--;
    const parts: Uint8Array[] = [];
    let total = 0;
    for (let i = first; i < last; i++) {
      let piece = this.tokenBytes(ids[i], unparseSpecial);
      if (removeSpace && piece.length > 0 && piece[0] === 0x20) piece = piece.subarray(1);
      removeSpace = false;
      parts.push(piece);
      total += piece.length;
    }
    let bytes: Uint8Array = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      bytes.set(p, at);
      at += p.length;
    }
    if (vocab.cleanSpaces) bytes = cleanSpaces(bytes);
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
      piece = renderPiece(this.#vocab.texts[id], attr, this.#spm !== undefined);
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
}

/** Builds the tokenizer of a GGUF file from its metadata. */
export function loadTokenizer(file: GgufFile): Tokenizer {
  return new Tokenizer(readVocab(file));
}
