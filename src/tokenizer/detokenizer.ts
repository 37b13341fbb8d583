/**
 * Incremental detokenizer for streaming: fed one token id at a time, it returns only
 * complete UTF-8 text. A character whose bytes are spread over several tokens (emoji, CJK
 * in byte tokens) is held back until its last byte arrives; `finish()` flushes what is left,
 * turning an incomplete trailing sequence into U+FFFD.
 */

import type { Tokenizer } from "./tokenizer.ts";

export interface DetokenizerOptions {
  /** Render control tokens' text (e.g. `<|im_end|>`); default false, as llama-server. */
  special?: boolean;
}

export class IncrementalDetokenizer {
  readonly #tokenizer: Tokenizer;
  readonly #special: boolean;
  #decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  constructor(tokenizer: Tokenizer, options: DetokenizerOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#special = options.special ?? false;
  }

  /** Adds one token; returns the text that became complete (possibly ""). */
  push(id: number): string {
    return this.#decoder.decode(this.#tokenizer.tokenBytes(id, this.#special), { stream: true });
  }

  /** Ends the stream; returns held-back bytes as text. The detokenizer can be reused. */
  finish(): string {
    const rest = this.#decoder.decode();
    this.#decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    return rest;
  }
}
