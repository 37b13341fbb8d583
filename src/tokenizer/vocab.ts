/**
 * The vocabulary as llama.cpp loads it (llama-vocab.cpp, llama_vocab::impl::load): token
 * texts and attributes from `tokenizer.ggml.*`, the special-token ids, the text-based fixes
 * llama.cpp applies on top of the file (tokens that look like end-of-turn or FIM markers
 * become CONTROL, `</s>` included), and the end-of-generation set derived the same way.
 */

import type { GgufFile } from "../gguf/mod.ts";
import {
  optionalBool,
  optionalIntArray,
  optionalNumber,
  optionalString,
  requireString,
  requireStringArray,
} from "../gguf/mod.ts";
import { TokenizerError } from "./errors.ts";
import type { PreTokenizerKind } from "./pretokenize.ts";

// llama_token_attr bits.
export const ATTR_UNKNOWN = 1 << 0;
const ATTR_UNUSED = 1 << 1;
export const ATTR_NORMAL = 1 << 2;
export const ATTR_CONTROL = 1 << 3;
export const ATTR_USER_DEFINED = 1 << 4;
export const ATTR_BYTE = 1 << 5;

// tokenizer.ggml.token_type values -> attributes.
const TYPE_TO_ATTR: Record<number, number> = {
  1: ATTR_NORMAL,
  2: ATTR_UNKNOWN,
  3: ATTR_CONTROL,
  4: ATTR_USER_DEFINED,
  5: ATTR_UNUSED,
  6: ATTR_BYTE,
};

interface PreTokenizerConfig {
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

// Texts llama.cpp recognises as end-of-turn, FIM and end-of-generation markers.
const EOT_TEXTS = [
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "<|end_of_text|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "<｜end▁of▁sentence｜>",
  "<end_of_utterance>",
];
const EOM_TEXTS = ["<|eom_id|>"];
const FIM_PRE_TEXTS = [
  "<|fim_prefix|>",
  "<fim-prefix>",
  "<fim_prefix>",
  "<｜fim▁begin｜>",
  "<PRE>",
  "▁<PRE>",
  "<|code_prefix|>",
  "<|prefix|>",
];
const FIM_SUF_TEXTS = [
  "<|fim_suffix|>",
  "<fim-suffix>",
  "<fim_suffix>",
  "<｜fim▁hole｜>",
  "<SUF>",
  "▁<SUF>",
  "<|code_suffix|>",
  "<|suffix|>",
];
const FIM_MID_TEXTS = [
  "<|fim_middle|>",
  "<fim-middle>",
  "<fim_middle>",
  "<｜fim▁end｜>",
  "<MID>",
  "▁<MID>",
  "<|code_middle|>",
  "<|middle|>",
];
const FIM_PAD_TEXTS = ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS = ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS = ["<|file_sep|>"];
const EOG_TEXTS = [
  "<|eot_id|>",
  "<|im_end|>",
  "<|end|>",
  "<|return|>",
  "<|call|>",
  "<|flush|>",
  "<|calls|>",
  "<end_of_turn>",
  "<|endoftext|>",
  "</s>",
  "<|eom_id|>",
  "<EOT>",
  "_<EOT>",
  "[EOT]",
  "[EOS]",
  "<|end_of_text|>",
  "<end_of_utterance>",
  "<eos>",
  "<turn|>",
  "<|tool_response>",
  "<｜end▁of▁sentence｜>",
  "[e~[",
];
// gpt-oss markers llama.cpp always renders as text.
const ALWAYS_RENDERED = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/** A loaded vocabulary. Ids are indexes into `texts` and `attrs`. */
export interface Vocab {
  readonly texts: readonly string[];
  readonly attrs: Uint8Array;
  readonly idOf: ReadonlyMap<string, number>;
  readonly pre: PreTokenizerConfig;
  readonly bosId: number | null;
  readonly eosId: number | null;
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly eogIds: ReadonlySet<number>;
  /** CONTROL, USER_DEFINED and UNKNOWN tokens, longest text (in bytes) first. */
  readonly specialIds: readonly number[];
  readonly merges: readonly string[];
}

function bad(message: string): TokenizerError {
  return new TokenizerError("tokenizer_bad_vocab", message);
}

const utf8 = new TextEncoder();

/** Reads and checks the vocabulary of a GGUF file (metadata only). */
export function readVocab(file: GgufFile): Vocab {
  const model = requireString(file, "tokenizer.ggml.model");
  if (model !== "gpt2") {
    throw new TokenizerError(
      "tokenizer_unsupported",
      `tokenizer model '${model}' is not supported (only byte-level BPE, 'gpt2')`,
    );
  }
  const preName = optionalString(file, "tokenizer.ggml.pre") ?? "default";
  const pre = PRE_TOKENIZERS[preName];
  if (pre === undefined) {
    throw new TokenizerError(
      "tokenizer_unsupported",
      `pre-tokenizer '${preName}' is not supported (supported: ${
        Object.keys(PRE_TOKENIZERS).join(", ")
      })`,
    );
  }

  const texts = requireStringArray(file, "tokenizer.ggml.tokens").slice();
  const n = texts.length;
  if (n === 0) throw bad("tokenizer.ggml.tokens is empty");
  const types = optionalIntArray(file, "tokenizer.ggml.token_type");
  if (types !== undefined && types.length < n) {
    throw bad(`tokenizer.ggml.token_type has ${types.length} entries for ${n} tokens`);
  }
  const merges = requireStringArray(file, "tokenizer.ggml.merges");

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
  // llama.cpp's defaults for the gpt2 model when the file names no bos/eos.
  const bosId = specialId("bos_token_id", 11);
  const eosId = specialId("eos_token_id", 11);
  // Markers the file does not name are recognised by their text and made CONTROL.
  const detect = (key: string, candidates: readonly string[]): number | null => {
    const given = specialId(key, null);
    if (given !== null) return given;
    for (const t of candidates) {
      const id = idOf.get(t);
      if (id === undefined) continue;
      attrs[id] |= ATTR_CONTROL;
      return id;
    }
    return null;
  };
  const eotId = detect("eot_token_id", EOT_TEXTS);
  const eomId = detect("eom_token_id", EOM_TEXTS);
  detect("fim_pre_token_id", FIM_PRE_TEXTS);
  detect("fim_suf_token_id", FIM_SUF_TEXTS);
  detect("fim_mid_token_id", FIM_MID_TEXTS);
  const fimPad = detect("fim_pad_token_id", FIM_PAD_TEXTS);
  const fimRep = detect("fim_rep_token_id", FIM_REP_TEXTS);
  const fimSep = detect("fim_sep_token_id", FIM_SEP_TEXTS);

  const eog = new Set<number>();
  for (const id of [fimPad, fimRep, fimSep]) if (id !== null) eog.add(id);
  for (const t of EOG_TEXTS) {
    const id = idOf.get(t);
    if (id === undefined) continue;
    eog.add(id);
    attrs[id] |= ATTR_CONTROL;
  }
  for (const t of ALWAYS_RENDERED) {
    const id = idOf.get(t);
    if (id !== undefined) attrs[id] = ATTR_USER_DEFINED;
  }
  for (const id of [eosId, eotId, eomId]) if (id !== null) eog.add(id);
  applyEogWorkarounds(texts, attrs, eog);

  const specialIds: number[] = [];
  const byteLength: number[] = [];
  for (let i = 0; i < n; i++) {
    if ((attrs[i] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) !== 0) {
      specialIds.push(i);
      byteLength[i] = utf8.encode(texts[i]).length;
    }
  }
  specialIds.sort((a, b) => byteLength[b] - byteLength[a] || a - b);

  return {
    texts,
    attrs,
    idOf,
    pre,
    bosId,
    eosId,
    addBos: optionalBool(file, "tokenizer.ggml.add_bos_token") ?? pre.addBos,
    addEos: optionalBool(file, "tokenizer.ggml.add_eos_token") ?? false,
    eogIds: eog,
    specialIds,
    merges,
  };
}

/**
 * llama.cpp's two vocabulary-specific exceptions: harmony-style vocabularies (with
 * `<|return|>`+`<|call|>` or `<|calls|>`+`<|flush|>`) do not end on `<|end|>`, and
 * vocabularies with `<|tool_response>` do not end on `</s>`.
 */
function applyEogWorkarounds(texts: readonly string[], attrs: Uint8Array, eog: Set<number>): void {
  const find = (t: string): number | undefined => [...eog].find((id) => texts[id] === t);
  const end = find("<|end|>");
  const call = find("<|call|>") ?? find("<|calls|>");
  if (
    end !== undefined && call !== undefined &&
    (find("<|return|>") !== undefined || find("<|flush|>") !== undefined)
  ) {
    eog.delete(end);
    attrs[end] = ATTR_USER_DEFINED;
  }
  const s = find("</s>");
  if (s !== undefined && find("<|tool_response>") !== undefined) {
    eog.delete(s);
    attrs[s] = ATTR_NORMAL;
  }
}
