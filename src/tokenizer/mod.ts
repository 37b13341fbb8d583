/** The tokenizer of a GGUF file (byte-level BPE or SentencePiece-style), exact against llama.cpp. */
export { TokenizerError, type TokenizerErrorCode } from "./errors.ts";
export { type DetokenizerOptions, IncrementalDetokenizer } from "./detokenizer.ts";
export { type DecodeOptions, type EncodeOptions, loadTokenizer, Tokenizer } from "./tokenizer.ts";
export { utf8Length } from "./unicode.ts";
