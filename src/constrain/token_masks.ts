/**
 * The tokens a grammar state allows: one walk of the vocabulary trie through the
 * automaton, kept per state, so a state met again (every character of a JSON string comes
 * back to the same one) costs a lookup. A mask with few tokens keeps their ids; a mask
 * with many keeps a bitset, whose all-ones words cost nothing to apply. The kept masks are
 * bounded in bytes; past the bound they are dropped and recomputed when met again.
 */

import { ByteAutomaton, DEAD } from "./automaton.ts";
import type { TokenTrie } from "./vocab_trie.ts";

export interface TokenMask {
  /** Allowed trie tokens: their ids (sparse) or a bitset over the vocabulary (dense). */
  readonly ids: Int32Array | null;
  readonly bits: Uint32Array | null;
  readonly count: number;
  /** End-of-generation tokens are allowed too: the input is a whole sentence. */
  readonly accepting: boolean;
}

/** Bytes of masks kept per grammar. */
const MASK_BUDGET_BYTES = 32 << 20;

export class TokenMasks {
  readonly automaton: ByteAutomaton;
  readonly trie: TokenTrie;
  readonly #masks = new Map<number, TokenMask>();
  #bytes = 0;
  readonly #stateAt: Int32Array;

  constructor(automaton: ByteAutomaton, trie: TokenTrie) {
    this.automaton = automaton;
    this.trie = trie;
    this.#stateAt = new Int32Array(trie.nodeCount);
  }

  /** The mask of `state`, computed on first use. */
  mask(state: number): TokenMask {
    let mask = this.#masks.get(state);
    if (mask === undefined) {
      mask = this.#compute(state);
      const size = mask.ids ? mask.ids.byteLength : mask.bits!.byteLength;
      if (this.#bytes + size > MASK_BUDGET_BYTES) {
        this.#masks.clear();
        this.#bytes = 0;
      }
      this.#masks.set(state, mask);
      this.#bytes += size;
    }
    return mask;
  }

  #compute(state: number): TokenMask {
    const { nodeCount, label, parent, subtreeEnd, tokenStart, tokens, vocabSize } = this.trie;
    const transitions = this.automaton.transitions;
    const stateAt = this.#stateAt;
    const bits = new Uint32Array((vocabSize + 31) >>> 5);
    let count = 0;
    stateAt[0] = state;
    for (let n = 1; n < nodeCount;) {
      const from = stateAt[parent[n]];
      let to = transitions[from][label[n]];
      if (to < DEAD) to = this.automaton.compute(from, label[n]);
      if (to === DEAD) {
        n = subtreeEnd[n];
        continue;
      }
      stateAt[n] = to;
      for (let k = tokenStart[n]; k < tokenStart[n + 1]; k++) {
        const id = tokens[k];
        bits[id >>> 5] |= 1 << (id & 31);
        count++;
      }
      n++;
    }
    const accepting = this.automaton.accepting(state);
    // Applying ids is a fill and `count` writes, a bitset one visit per forbidden token:
    // ids below an eighth of the vocabulary (where they cost at most 4x the bitset's bytes).
    if (count * 8 < vocabSize) {
      const ids = new Int32Array(count);
      let at = 0;
      for (let w = 0; w < bits.length; w++) {
        for (let word = bits[w]; word !== 0; word &= word - 1) {
          ids[at++] = (w << 5) | (31 - Math.clz32(word & -word));
        }
      }
      return { ids, bits: null, count, accepting };
    }
    return { ids: null, bits, count, accepting };
  }
}
