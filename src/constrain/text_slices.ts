/**
 * Plain-text slices of a vocabulary (llguidance's "slicer", on our automaton): most of a
 * vocabulary is plain text (145k of Qwen3's 152k tokens are whole UTF-8 characters with
 * no quote, backslash or control character), and inside a JSON string, or any free text a
 * grammar allows, the automaton lets every such token through. A state's mask would then
 * walk nearly the whole trie (333k nodes). Instead, how far plain text reaches from the
 * state (plain_text.ts) picks a slice: the plain tokens that reach allows, in one copy of
 * a precomputed bitset, and the trie of the rest of the vocabulary (12k-181k nodes), which
 * alone is walked.
 */

import { isPlainText, LOOK_AHEAD, type PlainReach } from "./plain_text.ts";
import { subTrie, type TokenTrie } from "./vocab_trie.ts";

/** Token lengths (bytes) slices are cut at: the remainder tries shrink with each. */
const LEVELS = [8, 16, 24];

/** Some plain tokens, all allowed at once, and the trie of every other token. */
export interface Slice {
  readonly bits: Uint32Array;
  readonly count: number;
  readonly remainder: TokenTrie;
}

export class TextSlices {
  /** [length in bytes, its slice], narrowest first; the last takes every plain token. */
  readonly #byBytes: Array<[number, Slice]>;
  /** `#byChars[c]`: the plain tokens of at most c characters (the rest is not plain). */
  readonly #byChars: Slice[];

  constructor(trie: TokenTrie) {
    // Each plain token's bytes (0: not plain), and its tokens by how many characters.
    const lengths = new Int32Array(trie.vocabSize);
    const ofChars: number[][] = Array.from({ length: LOOK_AHEAD + 1 }, () => []);
    let longest = 0;
    for (const id of trie.tokens) {
      const bytes = trie.pieces[id];
      if (!isPlainText(bytes)) continue;
      lengths[id] = bytes.length;
      longest = Math.max(longest, bytes.length);
      // Characters are the bytes that do not continue one (10xxxxxx).
      let chars = 0;
      for (const b of bytes) if ((b & 0xc0) !== 0x80) chars++;
      if (chars <= LOOK_AHEAD) ofChars[chars].push(id);
    }
    this.#byBytes = [...LEVELS.filter((l) => l < longest), longest].map((l) => {
      const bits = new Uint32Array((trie.vocabSize + 31) >>> 5);
      let count = 0;
      for (const id of trie.tokens) {
        if (lengths[id] === 0 || lengths[id] > l) continue;
        bits[id >>> 5] |= 1 << (id & 31);
        count++;
      }
      const remainder = subTrie(trie, (id) => lengths[id] === 0 || lengths[id] > l);
      return [l, { bits, count, remainder }];
    });
    const notPlain = subTrie(trie, (id) => lengths[id] === 0);
    const bits = new Uint32Array((trie.vocabSize + 31) >>> 5);
    let count = 0;
    this.#byChars = ofChars.map((ids) => {
      for (const id of ids) bits[id >>> 5] |= 1 << (id & 31);
      count += ids.length;
      return { bits: bits.slice(), count, remainder: notPlain };
    });
  }

  /** The widest slice whose tokens `reach` allows, all of them; null: none is wide enough. */
  sliceFor(reach: PlainReach): Slice | null {
    if (reach.closed) return this.#byChars[reach.alive];
    let widest: Slice | null = null;
    for (const [length, slice] of this.#byBytes) if (length <= reach.alive) widest = slice;
    return widest;
  }
}

const slicesOfTrie = new WeakMap<TokenTrie, TextSlices>();

/** The slices of `trie`'s vocabulary, made once per trie. */
export function slicesOf(trie: TokenTrie): TextSlices {
  let slices = slicesOfTrie.get(trie);
  if (slices === undefined) {
    slices = new TextSlices(trie);
    slicesOfTrie.set(trie, slices);
  }
  return slices;
}
