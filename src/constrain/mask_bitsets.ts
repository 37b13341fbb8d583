/**
 * What a grammar matcher allows next, as bitsets over the whole vocabulary: what native
 * greedy argmax takes (Backend.argmaxRows) and what the sampler's logits are masked with,
 * one definition for both. A state's mask with the end-of-generation ids added where the
 * state accepts, the same mask with the think-open token (a thinking model's first token),
 * and the reasoning block's all-but-the-end. A mask that adds nothing is its own bitset;
 * the others are built on first use and kept per state, shared by every sequence of the
 * grammar, under a byte bound of their own on the masks' policy: past it they are dropped
 * and built again when met.
 */

import type { TokenMask, TokenMasks } from "./token_masks.ts";

/** Bytes of bitsets kept per grammar and set of end-of-generation ids. */
const BITSET_BUDGET_BYTES = 16 << 20;

/** Bitsets per grammar, for each set of end-of-generation ids it is matched with. */
const shared = new WeakMap<TokenMasks, MaskBitsets[]>();

export class MaskBitsets {
  readonly eog: Int32Array;
  readonly #words: number;
  readonly #vocabSize: number;
  readonly #kept = new Map<number, Uint32Array>();
  /** The think-open token added to a state's bitset, by token and state. */
  readonly #opening = new Map<number, { state: number; bits: Uint32Array }>();
  #reasoning: Uint32Array | null = null;
  #bytes = 0;

  private constructor(vocabSize: number, eog: Int32Array) {
    this.eog = eog;
    this.#vocabSize = vocabSize;
    this.#words = Math.ceil(vocabSize / 32);
  }

  /** The bitsets of `masks` with these end-of-generation ids (made once, then shared). */
  static of(masks: TokenMasks, eog: Int32Array): MaskBitsets {
    let list = shared.get(masks);
    if (list === undefined) shared.set(masks, list = []);
    let found = list.find((b) => sameIds(b.eog, eog));
    if (found === undefined) list.push(found = new MaskBitsets(masks.trie.vocabSize, eog));
    return found;
  }

  /** Vocabulary size the bitsets cover. */
  get vocabSize(): number {
    return this.#vocabSize;
  }

  /** What `mask` (of `state`) allows, the end-of-generation ids too where it accepts. */
  grammar(state: number, mask: TokenMask): Uint32Array {
    if (!(mask.accepting && this.eog.length > 0)) return mask.bits;
    let bits = this.#kept.get(state);
    if (bits === undefined) {
      bits = this.#build(mask);
      if (this.#bytes + bits.byteLength > BITSET_BUDGET_BYTES) {
        this.#kept.clear();
        this.#bytes = 0;
      }
      this.#kept.set(state, bits);
      this.#bytes += bits.byteLength;
    }
    return bits;
  }

  /** `grammar(state, mask)` with token `open` allowed too. */
  opening(state: number, mask: TokenMask, open: number): Uint32Array {
    const kept = this.#opening.get(open);
    if (kept !== undefined && kept.state === state) return kept.bits;
    const bits = this.grammar(state, mask).slice();
    set(bits, open);
    this.#opening.set(open, { state, bits });
    return bits;
  }

  /** Every token but the end-of-generation ids. */
  reasoning(): Uint32Array {
    if (this.#reasoning === null) {
      const bits = new Uint32Array(this.#words).fill(0xffffffff);
      const tail = this.#vocabSize & 31;
      if (tail !== 0) bits[this.#words - 1] = (2 ** tail - 1) >>> 0;
      for (const id of this.eog) bits[id >>> 5] &= ~(1 << (id & 31));
      this.#reasoning = bits;
    }
    return this.#reasoning;
  }

  #build(mask: TokenMask): Uint32Array {
    const bits = mask.bits.slice();
    for (const id of this.eog) set(bits, id);
    return bits;
  }
}

function set(bits: Uint32Array, id: number): void {
  bits[id >>> 5] |= 1 << (id & 31);
}

function sameIds(a: Int32Array, b: Int32Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
