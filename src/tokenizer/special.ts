/**
 * Splits text around special tokens the way llama.cpp's tokenizer_st_partition does: each
 * special token in turn (longest text first) cuts every occurrence out of the text pieces
 * that are still raw, left to right. Control and unknown tokens are only matched when
 * special tokens are parsed; user-defined tokens (Qwen's `<think>`, `<tool_call>`) always.
 */

import { ATTR_CONTROL, ATTR_UNKNOWN, type Vocab } from "./vocab.ts";

/** A raw text piece, or the id of a special token found in the text. */
export type Fragment = string | number;

export function partitionSpecial(text: string, vocab: Vocab, parseSpecial: boolean): Fragment[] {
  let fragments: Fragment[] = [text];
  for (const id of vocab.specialIds) {
    if (!parseSpecial && (vocab.attrs[id] & (ATTR_CONTROL | ATTR_UNKNOWN)) !== 0) continue;
    const special = vocab.texts[id];
    if (!text.includes(special)) continue;
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
    fragments = next;
  }
  return fragments;
}
