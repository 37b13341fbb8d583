/**
 * A minimal byte-level BPE vocabulary in GGUF tokenizer metadata, for synthetic models
 * written without a real vocabulary: the 256 byte tokens (GPT-2's byte-to-unicode
 * spelling, in GPT-2's order), no merges (so text encodes one token per byte), the
 * ChatML control tokens, a ChatML chat template, and unused `[PAD<id>]` tokens up to the
 * requested size so the vocabulary matches the embedding rows.
 */

import { GgufError } from "./errors.ts";
import type { GgufKv } from "./file.ts";
import { Kv } from "./kv.ts";
import { GgufValueType } from "./types.ts";

/** llama.cpp's token types (`llama_token_type`). */
const NORMAL = 1;
const CONTROL = 3;
const UNUSED = 5;

const SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

const CHATML_TEMPLATE = "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/**
 * GPT-2's `bytes_to_unicode`: printable bytes stand for themselves, the others for
 * code points from 256 up, in byte order. Token i is the i-th byte of that listing.
 */
function byteTokens(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const tokens = printable.map((b) => String.fromCodePoint(b));
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    if (!printable.includes(b)) tokens.push(String.fromCodePoint(256 + extra++));
  }
  return tokens;
}

/** Smallest vocabulary this can describe: the bytes and the control tokens. */
export const MIN_BYTE_VOCAB = 256 + SPECIAL.length;

/** The `tokenizer.*` metadata of a byte-level vocabulary of exactly `size` tokens. */
export function byteLevelVocab(size: number): Array<[string, GgufKv]> {
  if (!Number.isSafeInteger(size) || size < MIN_BYTE_VOCAB) {
    throw new GgufError(
      "gguf_bad_value",
      `a byte-level vocabulary needs at least ${MIN_BYTE_VOCAB} tokens, got ${size}`,
    );
  }
  const tokens = [...byteTokens(), ...SPECIAL];
  const types = new Int32Array(size);
  types.fill(NORMAL, 0, 256);
  types.fill(CONTROL, 256, tokens.length);
  for (let id = tokens.length; id < size; id++) tokens.push(`[PAD${id}]`);
  types.fill(UNUSED, 256 + SPECIAL.length);
  const id = (t: (typeof SPECIAL)[number]) => 256 + SPECIAL.indexOf(t);
  return [
    ["tokenizer.ggml.model", Kv.string("gpt2")],
    ["tokenizer.ggml.pre", Kv.string("qwen2")],
    ["tokenizer.ggml.tokens", Kv.strings(tokens)],
    ["tokenizer.ggml.token_type", Kv.array(GgufValueType.INT32, types)],
    ["tokenizer.ggml.merges", Kv.strings([])],
    ["tokenizer.ggml.eos_token_id", Kv.u32(id("<|im_end|>"))],
    ["tokenizer.ggml.padding_token_id", Kv.u32(id("<|endoftext|>"))],
    ["tokenizer.ggml.bos_token_id", Kv.u32(id("<|endoftext|>"))],
    ["tokenizer.ggml.add_bos_token", Kv.bool(false)],
    ["tokenizer.chat_template", Kv.string(CHATML_TEMPLATE)],
  ];
}
