/**
 * Small hand-made vocabularies as GGUF metadata, for tests of the tokenizer's rules: an SPM
 * one laid out like Llama 2's and Mistral's (`<unk>`, `<s>`, `</s>`, the 256 byte tokens,
 * then scored pieces), written the way llama.cpp's converter writes them.
 */

import { encodeGguf, GgufValueType, Kv } from "../../src/gguf/mod.ts";
import type { GgufKv } from "../../src/gguf/mod.ts";

/** GGUF token types (tokenizer.ggml.token_type). */
export const TOKEN_TYPE = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

export interface SpmPiece {
  text: string;
  /** Merge priority, higher first; default 0. */
  score?: number;
  /** Default NORMAL. */
  type?: number;
}

export interface SpmVocabSpec {
  pieces: SpmPiece[];
  /** Leave out the byte tokens (`<0x00>`..`<0xFF>`). */
  noByteTokens?: boolean;
  /** Extra or overriding metadata. */
  meta?: Record<string, GgufKv>;
}

/** Id of the first piece of an SPM spec: after `<unk>`, `<s>`, `</s>` and the byte tokens. */
export const SPM_FIRST_PIECE = 3 + 256;

/** The GGUF bytes of an SPM vocabulary (`tokenizer.ggml.model = "llama"`), no tensors. */
export function spmVocabBytes(spec: SpmVocabSpec): Uint8Array {
  const head: SpmPiece[] = [
    { text: "<unk>", type: TOKEN_TYPE.UNKNOWN },
    { text: "<s>", type: TOKEN_TYPE.CONTROL },
    { text: "</s>", type: TOKEN_TYPE.CONTROL },
  ];
  const bytes: SpmPiece[] = Array.from({ length: 256 }, (_, b) => ({
    text: `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`,
    type: spec.noByteTokens ? TOKEN_TYPE.UNUSED : TOKEN_TYPE.BYTE,
  }));
  const all = [...head, ...bytes, ...spec.pieces];
  if (spec.noByteTokens) {
    for (let b = 0; b < 256; b++) all[3 + b].text = `[PAD${b}]`;
  }
  const kv = new Map<string, GgufKv>([
    ["general.architecture", Kv.string("llama")],
    ["tokenizer.ggml.model", Kv.string("llama")],
    ["tokenizer.ggml.pre", Kv.string("default")],
    ["tokenizer.ggml.tokens", Kv.strings(all.map((p) => p.text))],
    [
      "tokenizer.ggml.scores",
      Kv.array(GgufValueType.FLOAT32, Float32Array.from(all.map((p) => p.score ?? 0))),
    ],
    [
      "tokenizer.ggml.token_type",
      Kv.array(GgufValueType.INT32, Int32Array.from(all.map((p) => p.type ?? TOKEN_TYPE.NORMAL))),
    ],
    ["tokenizer.ggml.bos_token_id", Kv.u32(1)],
    ["tokenizer.ggml.eos_token_id", Kv.u32(2)],
    ["tokenizer.ggml.unknown_token_id", Kv.u32(0)],
    ...Object.entries(spec.meta ?? {}),
  ]);
  return encodeGguf({ kv, tensors: [] });
}
