/** llama.cpp's token attributes (llama_token_attr bits) and the GGUF token types they come from. */

export const ATTR_UNKNOWN = 1 << 0;
export const ATTR_UNUSED = 1 << 1;
export const ATTR_NORMAL = 1 << 2;
export const ATTR_CONTROL = 1 << 3;
export const ATTR_USER_DEFINED = 1 << 4;
export const ATTR_BYTE = 1 << 5;

/** tokenizer.ggml.token_type values -> attributes; any other value is UNDEFINED (0). */
export const TYPE_TO_ATTR: Readonly<Record<number, number>> = {
  1: ATTR_NORMAL,
  2: ATTR_UNKNOWN,
  3: ATTR_CONTROL,
  4: ATTR_USER_DEFINED,
  5: ATTR_UNUSED,
  6: ATTR_BYTE,
};
