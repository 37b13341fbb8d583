/**
 * Text in and out of llama.cpp: llama_tokenize, llama_detokenize and metadata values, each
 * retried with the buffer size llama.cpp asks for.
 */

import { LlamaRefError } from "./errors.ts";
import { cString, type LlamaSymbols } from "./library.ts";

type Ptr = NonNullable<Deno.PointerValue>;

/** Text to ids as llama_tokenize does it. */
export function tokenize(
  sym: LlamaSymbols,
  vocab: Ptr,
  text: string,
  opts: { special: boolean; addSpecial: boolean },
): number[] {
  const bytes = new TextEncoder().encode(text);
  let capacity = bytes.length + 8;
  for (;;) {
    const out = new Int32Array(capacity);
    const n = sym.llama_tokenize(
      vocab,
      bytes,
      bytes.length,
      out,
      capacity,
      opts.addSpecial,
      opts.special,
    );
    if (n >= 0) return [...out.subarray(0, n)];
    if (n === -2147483648) {
      throw new LlamaRefError("llama_ref_bad_input", `text of ${bytes.length} bytes is too long`);
    }
    capacity = -n;
  }
}

/** Ids to text as llama_detokenize does it (the ids already checked against the vocabulary). */
export function detokenize(
  sym: LlamaSymbols,
  vocab: Ptr,
  ids: readonly number[],
  opts: { special?: boolean; removeSpecial?: boolean },
): string {
  const tokens = Int32Array.from(ids);
  let capacity = ids.length * 8 + 16;
  for (;;) {
    const out = new Uint8Array(capacity);
    const n = sym.llama_detokenize(
      vocab,
      tokens,
      tokens.length,
      out,
      capacity,
      opts.removeSpecial ?? false,
      opts.special ?? true,
    );
    if (n >= 0) return new TextDecoder("utf-8", { ignoreBOM: true }).decode(out.subarray(0, n));
    capacity = -n;
  }
}

/** A metadata value as llama.cpp formats it, or undefined when the key is absent. */
export function metaValue(sym: LlamaSymbols, model: Ptr, key: string): string | undefined {
  let capacity = 256;
  for (;;) {
    const out = new Uint8Array(capacity);
    const n = sym.llama_model_meta_val_str(model, cString(key), out, BigInt(capacity));
    if (n < 0) return undefined;
    if (n < capacity) return new TextDecoder().decode(out.subarray(0, n));
    capacity = n + 1;
  }
}
