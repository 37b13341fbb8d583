import { NeuronError } from "../common/errors.ts";

/** Stable codes for everything that can be wrong with a vocabulary or a tokenizer call. */
export type TokenizerErrorCode =
  | "tokenizer_unsupported"
  | "tokenizer_bad_vocab"
  | "tokenizer_bad_token_id";

/** A vocabulary neuron cannot use, or a request a tokenizer cannot serve. */
export class TokenizerError extends NeuronError {
  override readonly code: TokenizerErrorCode;

  constructor(code: TokenizerErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.code = code;
  }
}
