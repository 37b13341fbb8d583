import { NeuronError } from "../common/errors.ts";

/** Stable codes for everything that can be wrong with a GGUF file or a value written to one. */
export const GGUF_ERROR_CODES = [
  "gguf_io",
  "gguf_bad_magic",
  "gguf_unsupported_version",
  "gguf_truncated",
  "gguf_bad_value_type",
  "gguf_bad_value",
  "gguf_too_large",
  "gguf_duplicate_key",
  "gguf_bad_alignment",
  "gguf_bad_tensor",
  "gguf_duplicate_tensor",
  "gguf_unknown_tensor_type",
  "gguf_missing_key",
  "gguf_wrong_key_type",
  "gguf_missing_tensor",
  "gguf_unsupported",
  "gguf_bad_split",
] as const;

export type GgufErrorCode = (typeof GGUF_ERROR_CODES)[number];

/** A GGUF file that cannot be used as given. `offset` is the byte where the problem is. */
export class GgufError extends NeuronError {
  override readonly code: GgufErrorCode;
  readonly offset: number | undefined;

  constructor(code: GgufErrorCode, message: string, offset?: number, options?: ErrorOptions) {
    super(code, offset === undefined ? message : `${message} (at byte ${offset})`, options);
    this.code = code;
    this.offset = offset;
  }
}
