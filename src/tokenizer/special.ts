/**
 * Splits text around special tokens the way llama.cpp's tokenizer_st_partition does: each
 * special token in turn (longest text first) cuts every occurrence out of the text pieces
 * that are still raw, left to right. Control and unknown tokens are only matched when
 * special tokens are parsed; user-defined tokens (Qwen's `<think>`, `<tool_call>`) always.
 *
 * A vocabulary may have thousands of special tokens (Gemma 3 has over 6,000), and a pass
 * per token over a long text adds up; so one pass over the text with a trie of their texts
 * first finds the few that occur at all, and only those take their turn.
 */

import { ATTR_CONTROL, ATTR_UNKNOWN, type Vocab } from "./vocab.ts";

/** A raw text piece, or the id of a special token found in the text. */
export type Fragment = string | number;

export class SpecialSplitter {
  readonly #vocab: Vocab;
  /** Trie over UTF-16 code units: children of each node, and the token ending there. */
  #children: Map<number, number>[] = [];
  #ending: number[] = [];
  /** Each special token's place in llama.cpp's order (longest first). */
  #turn = new Map<number, number>();

  constructor(vocab: Vocab) {
    this.#vocab = vocab;
  }

  split(text: string, parseSpecial: boolean): Fragment[] {
    const vocab = this.#vocab;
    let fragments: Fragment[] = [text];
    for (const id of this.#occurring(text)) {
      if (!parseSpecial && (vocab.attrs[id] & (ATTR_CONTROL | ATTR_UNKNOWN)) !== 0) continue;
      fragments = cut(fragments, vocab.texts[id], id);
    }
    return fragments;
  }

  /** The special tokens whose text occurs somewhere in `text`, in their turn's order. */
  #occurring(text: string): number[] {
    if (this.#children.length === 0) this.#build();
    const children = this.#children;
    const ending = this.#ending;
    const found = new Set<number>();
    for (let i = 0; i < text.length; i++) {
      let node = children[0].get(text.charCodeAt(i));
      for (let j = i + 1; node !== undefined; j++) {
        if (ending[node] >= 0) found.add(ending[node]);
        if (j >= text.length) break;
        node = children[node].get(text.charCodeAt(j));
      }
    }
    return [...found].sort((a, b) => this.#turn.get(a)! - this.#turn.get(b)!);
  }

  #build(): void {
    const children: Map<number, number>[] = [new Map()];
    const ending = [-1];
    this.#vocab.specialIds.forEach((id, turn) => this.#turn.set(id, turn));
    for (const id of this.#vocab.specialIds) {
      const text = this.#vocab.texts[id];
      let node = 0;
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        let next = children[node].get(c);
        if (next === undefined) {
          next = children.length;
          children.push(new Map());
          ending.push(-1);
          children[node].set(c, next);
        }
        node = next;
      }
      ending[node] = id;
    }
    this.#children = children;
    this.#ending = ending;
  }
}

/** Cuts every occurrence of `special` out of the raw pieces, leftmost first. */
function cut(fragments: Fragment[], special: string, id: number): Fragment[] {
  const next: Fragment[] = [];
  for (const fragment of fragments) {
    if (typeof fragment === "number") {
      next.push(fragment);
      continue;
    }
    let from = 0;
    for (;;) {
      const at = fragment.indexOf(special, from);
      if (at < 0) break;
      if (at > from) next.push(fragment.slice(from, at));
      next.push(id);
      from = at + special.length;
    }
    if (from < fragment.length) next.push(from === 0 ? fragment : fragment.slice(from));
  }
  return next;
}
