/**
 * Compiled constraints of one vocabulary, kept by their sources: the same grammar or
 * schema asked again (every request of an agent sends its schema) reuses the automaton
 * and the masks already computed for it. Least recently used grammars are dropped past
 * `capacity`, so the memory they hold is bounded (each keeps at most its mask budget).
 */

import { ByteAutomaton } from "./automaton.ts";
import { type GrammarPart, joinParts } from "./spec.ts";
import { TokenMasks } from "./token_masks.ts";
import type { TokenTrie } from "./vocab_trie.ts";

const DEFAULT_CAPACITY = 16;

/**
 * States whose transitions are computed when a grammar is compiled (a JSON schema of a
 * few fields has 1-3k), ~5-10 µs each then instead of inside a token's mask later; and
 * the parse stacks that may take (most states have 1-4).
 */
const EXPAND_STATES = 4096;
const EXPAND_STACKS = 16_384;

export class ConstraintCompiler {
  readonly trie: TokenTrie;
  readonly #capacity: number;
  readonly #compiled = new Map<string, TokenMasks>();

  constructor(trie: TokenTrie, capacity = DEFAULT_CAPACITY) {
    this.trie = trie;
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#compiled.size;
  }

  /** The masks of the grammar joined from `parts` under the root rule body `root`. */
  compile(parts: readonly GrammarPart[], root: string): TokenMasks {
    const key = JSON.stringify([parts, root]);
    const known = this.#compiled.get(key);
    if (known !== undefined) {
      this.#compiled.delete(key);
      this.#compiled.set(key, known);
      return known;
    }
    const automaton = new ByteAutomaton(joinParts(parts, root).build());
    automaton.expandAhead(EXPAND_STATES, EXPAND_STACKS);
    const masks = new TokenMasks(automaton, this.trie);
    this.#compiled.set(key, masks);
    if (this.#compiled.size > this.#capacity) {
      this.#compiled.delete(this.#compiled.keys().next().value!);
    }
    return masks;
  }
}
