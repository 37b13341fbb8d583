/**
 * llama.cpp's grammar sampler (llama_sampler_init_grammar) as an oracle for GBNF: which
 * tokens it lets through next, and whether the text so far may end. A token is offered
 * alone (a one-candidate llama_token_data_array); the grammar sets its logit to -inf when
 * it refuses it. Only tokens it allowed are accepted: accepting another aborts llama.cpp.
 */

import { TOKEN_DATA_ARRAY_SIZE, TOKEN_DATA_SIZE } from "./abi.ts";
import { address, withPinned } from "./batch.ts";
import { LlamaRefError } from "./errors.ts";
import { cString, type LlamaSymbols } from "./library.ts";

type Ptr = NonNullable<Deno.PointerValue>;

export class LlamaGrammar {
  #sym: LlamaSymbols;
  #sampler: Ptr | null;
  readonly #eog: readonly number[];

  constructor(sym: LlamaSymbols, sampler: Ptr, eog: readonly number[]) {
    this.#sym = sym;
    this.#sampler = sampler;
    this.#eog = eog;
  }

  /** The grammar, or null where llama.cpp refuses it (it logs why). */
  static open(
    sym: LlamaSymbols,
    vocab: Ptr,
    text: string,
    eog: readonly number[],
    root = "root",
  ): LlamaGrammar | null {
    const sampler = sym.llama_sampler_init_grammar(vocab, cString(text), cString(root));
    return sampler === null ? null : new LlamaGrammar(sym, sampler, eog);
  }

  #live(): Ptr {
    if (this.#sampler === null) throw new LlamaRefError("llama_ref_closed", "grammar freed");
    return this.#sampler;
  }

  /** Which of `ids` the grammar allows next. */
  allowed(ids: readonly number[]): boolean[] {
    const sampler = this.#live();
    const data = new Uint8Array(new ArrayBuffer(Math.max(1, ids.length) * TOKEN_DATA_SIZE));
    const dv = new DataView(data.buffer);
    ids.forEach((id, i) => {
      dv.setInt32(i * TOKEN_DATA_SIZE, id, true);
      dv.setFloat32(i * TOKEN_DATA_SIZE + 4, 0, true);
    });
    const arr = new Uint8Array(new ArrayBuffer(TOKEN_DATA_ARRAY_SIZE));
    const av = new DataView(arr.buffer);
    av.setBigUint64(0, address(data), true);
    av.setBigUint64(8, BigInt(ids.length), true);
    av.setBigInt64(16, -1n, true);
    withPinned([data, arr], () => this.#sym.llama_sampler_apply(sampler, arr));
    return ids.map((_, i) => dv.getFloat32(i * TOKEN_DATA_SIZE + 4, true) !== -Infinity);
  }

  /** Whether the text so far may end (an end-of-generation token is allowed). */
  mayEnd(): boolean {
    return this.allowed(this.#eog).some((x) => x);
  }

  /** Takes `id`, which `allowed` must have let through. */
  accept(id: number): void {
    if (!this.allowed([id])[0]) {
      throw new LlamaRefError("llama_ref_bad_input", `token ${id} is not allowed here`);
    }
    this.#sym.llama_sampler_accept(this.#live(), id);
  }

  [Symbol.dispose](): void {
    this.free();
  }

  free(): void {
    if (this.#sampler !== null) this.#sym.llama_sampler_free(this.#sampler);
    this.#sampler = null;
  }
}
