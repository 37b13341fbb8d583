/**
 * The tokens a grammar state allows: one walk of the vocabulary trie through the
 * automaton, kept per state, so a state met again (every character of a JSON string comes
 * back to the same one) costs a lookup. A mask with few tokens keeps their ids; a mask
 * with many keeps a bitset, whose all-ones words cost nothing to apply. The kept masks are
 * bounded in bytes; past the bound they are dropped and recomputed when met again. The
 * walk runs in the CPU kernel library (nk_token_mask_walk) when it can be opened, coming
 * back here only for transitions not computed yet; the walk below is its reference.
 */

import { type CpuSymbols, openCpuLibrary } from "../backend/cpu/library.ts";
import { type ByteAutomaton, DEAD } from "./automaton.ts";
import type { TokenTrie } from "./vocab_trie.ts";

let library: CpuSymbols | null | undefined;

/** The CPU kernel library's walk, or null where the library cannot be opened. */
function nativeWalk(): CpuSymbols | null {
  if (library === undefined) {
    try {
      library = openCpuLibrary().symbols;
    } catch {
      library = null;
    }
  }
  return library;
}

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
  readonly #native: CpuSymbols | null;
  readonly #count = new BigInt64Array(1);

  /** `native: false` keeps the walk in TypeScript (the reference). */
  constructor(automaton: ByteAutomaton, trie: TokenTrie, options: { native?: boolean } = {}) {
    this.automaton = automaton;
    this.trie = trie;
    this.#stateAt = new Int32Array(trie.nodeCount);
    this.#native = options.native === false ? null : nativeWalk();
  }

  /** Whether masks are walked by the CPU kernel library. */
  get native(): boolean {
    return this.#native !== null;
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
    const bits = new Uint32Array((this.trie.vocabSize + 31) >>> 5);
    this.#stateAt[0] = state;
    const count = this.#native ? this.#walkNative(bits) : this.#walk(bits);
    return this.#pack(bits, count, this.automaton.accepting(state));
  }

  /** nk_token_mask_walk, resumed after each transition it found missing. */
  #walkNative(bits: Uint32Array): number {
    const { nodeCount, label, parent, subtreeEnd, tokenStart, tokens } = this.trie;
    const sym = this.#native!;
    const stateAt = this.#stateAt;
    this.#count[0] = 0n;
    for (let n = 1;;) {
      const stop = Number(
        sym.nk_token_mask_walk(
          this.automaton.table,
          label,
          parent,
          subtreeEnd,
          tokenStart,
          tokens,
          stateAt,
          bits,
          BigInt(nodeCount),
          BigInt(n),
          this.#count,
        ),
      );
      if (stop < 0) return Number(this.#count[0]);
      this.automaton.computeRow(stateAt[parent[stop]]);
      n = stop;
    }
  }

  /** The walk: a table read per trie node, a dead prefix skipping its subtree. */
  #walk(bits: Uint32Array): number {
    const { nodeCount, label, parent, subtreeEnd, tokenStart, tokens } = this.trie;
    const automaton = this.automaton;
    let table = automaton.table;
    const stateAt = this.#stateAt;
    let count = 0;
    for (let n = 1; n < nodeCount;) {
      const from = stateAt[parent[n]];
      let to = table[(from << 8) | label[n]];
      if (to < DEAD) {
        to = automaton.compute(from, label[n]);
        table = automaton.table;
      }
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
    return count;
  }

  #pack(bits: Uint32Array, count: number, accepting: boolean): TokenMask {
    const vocabSize = this.trie.vocabSize;
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
