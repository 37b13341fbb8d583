import { NeuronError } from "../../../src/common/errors.ts";

/** Stable codes for what can go wrong with the llama.cpp reference. */
export const LLAMA_REF_ERROR_CODES = [
  /** The prebuilt package could not be fetched, or is not for this machine. */
  "llama_ref_unavailable",
  /** The library is not the llama.cpp release whose llama.h this binding mirrors. */
  "llama_ref_version",
  /** A struct read back from the library does not have llama.h's layout. */
  "llama_ref_abi",
  /** llama.cpp refused the model file. */
  "llama_ref_load",
  /** A token, text or request the reference cannot take. */
  "llama_ref_bad_input",
  /** llama_decode failed. */
  "llama_ref_decode",
  /** The model asked for something it does not have (a chat template, pooled embeddings). */
  "llama_ref_unsupported",
  /** The model was used after close(). */
  "llama_ref_closed",
] as const;

export type LlamaRefErrorCode = (typeof LLAMA_REF_ERROR_CODES)[number];

/** An error of the llama.cpp test reference; its message carries llama.cpp's own log lines. */
export class LlamaRefError extends NeuronError {
  override readonly code: LlamaRefErrorCode;

  constructor(code: LlamaRefErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.code = code;
  }
}
