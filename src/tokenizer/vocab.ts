/**
 * The vocabulary as llama.cpp loads it (llama-vocab.cpp, llama_vocab::impl::load): the
 * tokenizer model (`gpt2`: byte-level BPE with a pre-tokenizer; `llama`: SentencePiece-style,
 * merged by score), token texts, scores and attributes from `tokenizer.ggml.*`, the
 * special-token ids with llama.cpp's defaults per model, and the fixes of markers.ts.
 */

import type { GgufFile } from "../gguf/mod.ts";
import {
  optionalArray,
  optionalBool,
  optionalIntArray,
  optionalNumber,
  optionalString,
  requireString,
  requireStringArray,
} from "../gguf/mod.ts";
import {
  ATTR_CONTROL,
  ATTR_NORMAL,
  ATTR_UNKNOWN,
  ATTR_USER_DEFINED,
  TYPE_TO_ATTR,
} from "./attrs.ts";
import { TokenizerError } from "./errors.ts";
import { markSpecialTokens } from "./markers.ts";
import type { PreTokenizerKind } from "./pretokenize.ts";

export {
  ATTR_BYTE,
  ATTR_CONTROL,
  ATTR_NORMAL,
  ATTR_UNKNOWN,
  ATTR_UNUSED,
  ATTR_USER_DEFINED,
} from "./attrs.ts";

export interface PreTokenizerConfig {
  kind: PreTokenizerKind;
  /** Emit a word that is itself a token without running merges (llama3). */
  ignoreMerges: boolean;
  /** Detokenizer removes spaces before punctuation and contractions. */
  cleanSpaces: boolean;
  /** Default for add_bos when the file does not say. */
  addBos: boolean;
}

// `tokenizer.ggml.pre` values whose pre-tokenizer is one of ours, with llama.cpp's flags.
const PRE_TOKENIZERS: Record<string, PreTokenizerConfig> = {
  "qwen2": { kind: "qwen2", ignoreMerges: false, cleanSpaces: false, addBos: false },
  "deepseek-r1-qwen": { kind: "qwen2", ignoreMerges: false, cleanSpaces: false, addBos: false },
  "llama3": { kind: "llama3", ignoreMerges: true, cleanSpaces: true, addBos: true },
  "llama-v3": { kind: "llama3", ignoreMerges: true, cleanSpaces: true, addBos: true },
  "llama-bpe": { kind: "llama3", ignoreMerges: true, cleanSpaces: true, addBos: true },
};

/** How raw text becomes tokens: byte-level BPE after a pre-tokenizer, or SentencePiece. */
export type VocabModel =
  | { readonly kind: "bpe"; readonly pre: PreTokenizerConfig; readonly merges: readonly string[] }
  | {
    readonly kind: "spm";
    /** Merge priority of each token (higher first); 0 where the file has none. */
    readonly scores: Float32Array;
    /** The token each byte falls back to (`<0xXX>`, or the byte's own character). */
    readonly byteIds: Int32Array;
  };

/** A loaded vocabulary. Ids are indexes into `texts` and `attrs`. */
export interface Vocab {
  readonly model: VocabModel;
  readonly texts: readonly string[];
  readonly attrs: Uint8Array;
  readonly idOf: ReadonlyMap<string, number>;
  readonly bosId: number | null;
  readonly eosId: number | null;
  readonly addBos: boolean;
  readonly addEos: boolean;
  /** SPM: a space starts the text and every piece after a special token; decoding drops it. */
  readonly addSpacePrefix: boolean;
  /** Decoding removes spaces before punctuation and contractions. */
  readonly cleanSpaces: boolean;
  readonly eogIds: ReadonlySet<number>;
  /** CONTROL, USER_DEFINED and UNKNOWN tokens, longest text (in bytes) first. */
  readonly specialIds: readonly number[];
}

function bad(message: string): TokenizerError {
  return new TokenizerError("tokenizer_bad_vocab", message);
}

function unsupported(message: string): TokenizerError {
  return new TokenizerError("tokenizer_unsupported", message);
}

const utf8 = new TextEncoder();
const MODELS = ["gpt2", "llama"];

/** Reads and checks the vocabulary of a GGUF file (metadata only). */
export function readVocab(file: GgufFile): Vocab {
  const modelName = requireString(file, "tokenizer.ggml.model");
  if (!MODELS.includes(modelName)) {
    throw unsupported(
      `tokenizer model '${modelName}' is not supported (supported: ${MODELS.join(", ")})`,
    );
  }
  const spm = modelName === "llama";
  // llama.cpp reads the pre-tokenizer of BPE vocabularies only.
  let pre: PreTokenizerConfig | undefined;
  if (!spm) {
    const preName = optionalString(file, "tokenizer.ggml.pre") ?? "default";
    pre = PRE_TOKENIZERS[preName];
    if (pre === undefined) {
      throw unsupported(
        `pre-tokenizer '${preName}' is not supported (supported: ${
          Object.keys(PRE_TOKENIZERS).join(", ")
        })`,
      );
    }
  }

  const texts = requireStringArray(file, "tokenizer.ggml.tokens").slice();
  const n = texts.length;
  if (n === 0) throw bad("tokenizer.ggml.tokens is empty");
  const types = optionalIntArray(file, "tokenizer.ggml.token_type");
  if (types !== undefined && types.length < n) {
    throw bad(`tokenizer.ggml.token_type has ${types.length} entries for ${n} tokens`);
  }

  const idOf = new Map<string, number>();
  const attrs = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (texts[i] === "") texts[i] = `[EMPTY_${i}]`;
    const previous = idOf.get(texts[i]);
    if (previous !== undefined) {
      throw bad(`duplicate token in vocabulary: '${texts[i]}' has ids ${previous} and ${i}`);
    }
    idOf.set(texts[i], i);
    attrs[i] = types === undefined ? ATTR_NORMAL : (TYPE_TO_ATTR[types[i]] ?? 0);
  }

  // An id the file gives out of range falls back to the default, as in llama.cpp.
  const inRange = (id: number | null | undefined): id is number =>
    typeof id === "number" && Number.isInteger(id) && id >= 0 && id < n;
  const specialId = (key: string, fallback: number | null): number | null => {
    const id = optionalNumber(file, `tokenizer.ggml.${key}`);
    if (inRange(id)) return id;
    return inRange(fallback) ? fallback : null;
  };
  // llama.cpp's defaults when the file names no bos/eos: 1 and 2 for SPM, 11 for gpt2.
  const bosId = specialId("bos_token_id", spm ? 1 : 11);
  const eosId = specialId("eos_token_id", spm ? 2 : 11);
  const eogIds = markSpecialTokens(texts, attrs, idOf, (key) => specialId(key, null), eosId);

  const specialIds: number[] = [];
  const byteLength: number[] = [];
  for (let i = 0; i < n; i++) {
    if ((attrs[i] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) !== 0) {
      specialIds.push(i);
      byteLength[i] = utf8.encode(texts[i]).length;
    }
  }
  specialIds.sort((a, b) => byteLength[b] - byteLength[a] || a - b);

  const model: VocabModel = pre === undefined
    ? { kind: "spm", scores: readScores(file, n), byteIds: byteFallback(idOf) }
    : { kind: "bpe", pre, merges: requireStringArray(file, "tokenizer.ggml.merges") };
  return {
    model,
    texts,
    attrs,
    idOf,
    bosId,
    eosId,
    addBos: optionalBool(file, "tokenizer.ggml.add_bos_token") ?? (pre?.addBos ?? true),
    addEos: optionalBool(file, "tokenizer.ggml.add_eos_token") ?? false,
    addSpacePrefix: optionalBool(file, "tokenizer.ggml.add_space_prefix") ?? spm,
    cleanSpaces: pre?.cleanSpaces ?? false,
    eogIds,
    specialIds,
  };
}

function readScores(file: GgufFile, n: number): Float32Array {
  const scores = optionalArray(file, "tokenizer.ggml.scores");
  if (scores === undefined) return new Float32Array(n);
  if (!(scores instanceof Float32Array)) {
    throw bad("tokenizer.ggml.scores should be an array of float32");
  }
  if (scores.length < n) {
    throw bad(`tokenizer.ggml.scores has ${scores.length} entries for ${n} tokens`);
  }
  return scores;
}

/**
 * The token each byte falls back to in an SPM vocabulary: `<0xXX>`, else (ASCII) the byte's
 * own character, as llama.cpp's byte_to_token looks them up. llama.cpp aborts on a byte that
 * has neither, so such a vocabulary is refused here instead.
 */
function byteFallback(idOf: ReadonlyMap<string, number>): Int32Array {
  const ids = new Int32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    const hex = byte.toString(16).toUpperCase().padStart(2, "0");
    const id = idOf.get(`<0x${hex}>`) ??
      (byte < 0x80 ? idOf.get(String.fromCharCode(byte)) : undefined);
    if (id === undefined) {
      throw bad(`SentencePiece vocabulary has no token for byte 0x${hex} (<0x${hex}>)`);
    }
    ids[byte] = id;
  }
  return ids;
}
