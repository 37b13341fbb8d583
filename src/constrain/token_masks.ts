/**
 * The tokens a grammar state allows: one walk of the vocabulary trie through the
 * automaton, kept per state, so a state met again (every character of a JSON string comes
 * back to the same one) costs a lookup. Where plain text is alive deep enough from the
 * state, its plain tokens come in one bitset copy and only the rest of the vocabulary is
 * walked (text_slices.ts). A mask is a bitset over the vocabulary (19 KB on Qwen's): what
 * the native argmax reads and nk_token_mask_apply applies in one pass over the logits.
 * The kept masks are bounded in bytes; past the bound they are dropped and recomputed when
 * met again (860 masks per grammar on Qwen's vocabulary; 16 grammars are kept per
 * vocabulary, compiler.ts: 256 MB at most). The walk runs in
 * the CPU kernel library (nk_token_mask_walk) when it can be opened, coming back here only
 * for transitions not computed yet. The reference (`native: false, slices: false`) is the
 * TypeScript walk of the whole trie.
 */

import type { CpuSymbols } from "../backend/cpu/library.ts";
import { type ByteAutomaton, DEAD } from "./automaton.ts";
import { nativeMasks } from "./native.ts";
import { PlainText } from "./plain_text.ts";
import { slicesOf, type TextSlices } from "./text_slices.ts";
import type { TokenTrie } from "./vocab_trie.ts";

export interface TokenMask {
  /** Allowed trie tokens: bit `id` of the bitset over the vocabulary. */
  readonly bits: Uint32Array;
  readonly count: number;
  /** End-of-generation tokens are allowed too: the input is a whole sentence. */
  readonly accepting: boolean;
}

/** Bytes of masks kept per grammar. */
const MASK_BUDGET_BYTES = 16 << 20;

export class TokenMasks {
  readonly automaton: ByteAutomaton;
  readonly trie: TokenTrie;
  readonly #masks = new Map<number, TokenMask>();
  #bytes = 0;
  readonly #stateAt: Int32Array;
  readonly #native: CpuSymbols | null;
  readonly #slices: TextSlices | null;
  readonly #plain: PlainText;
  readonly #count = new BigInt64Array(1);

  /**
   * `native: false` keeps the walk in TypeScript, `slices: false` walks the whole trie
   * for every state: both together are the reference.
   */
  constructor(
    automaton: ByteAutomaton,
    trie: TokenTrie,
    options: { native?: boolean; slices?: boolean } = {},
  ) {
    this.automaton = automaton;
    this.trie = trie;
    this.#stateAt = new Int32Array(trie.nodeCount);
    this.#native = options.native === false ? null : nativeMasks();
    this.#slices = options.slices === false ? null : slicesOf(trie);
    this.#plain = new PlainText(automaton);
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
      const size = mask.bits.byteLength;
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
    const slice = this.#slices?.sliceFor(this.#plain.reach(state)) ?? null;
    const trie = slice ? slice.remainder : this.trie;
    const bits = slice ? slice.bits.slice() : new Uint32Array((this.trie.vocabSize + 31) >>> 5);
    this.#stateAt[0] = state;
    const walked = this.#native ? this.#walkNative(trie, bits) : this.#walk(trie, bits);
    const count = walked + (slice ? slice.count : 0);
    return { bits, count, accepting: this.automaton.accepting(state) };
  }

  /** nk_token_mask_walk, resumed after each transition it found missing. */
  #walkNative(trie: TokenTrie, bits: Uint32Array): number {
    const { nodeCount, label, parent, subtreeEnd, tokenStart, tokens } = trie;
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
  #walk(trie: TokenTrie, bits: Uint32Array): number {
    const { nodeCount, label, parent, subtreeEnd, tokenStart, tokens } = trie;
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
}
