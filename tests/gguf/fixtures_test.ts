/**
 * The fixture files read as fixtures/README.md describes them: shapes, tensor types and
 * the metadata every model fixture shares.
 */

import { assertEquals } from "../support/assert.ts";
import { fixture } from "../fixtures.ts";
import {
  type GgufFile,
  openGguf,
  optionalBool,
  optionalIntArray,
  requireNumber,
  requireString,
  requireStringArray,
} from "../../src/gguf/mod.ts";

interface Shape {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  tied: boolean;
}

const TINY: Shape = {
  hidden: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 32,
  ffn: 192,
  tied: true,
};
const SMALL: Shape = {
  hidden: 256,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 64,
  ffn: 768,
  tied: false,
};
const VOCAB = 151936;

/** Qwen3's tensors by name with their ggml shapes (ne[0] first). */
function qwen3Shapes(s: Shape): Map<string, number[]> {
  const out = new Map<string, number[]>([
    ["token_embd.weight", [s.hidden, VOCAB]],
    ["output_norm.weight", [s.hidden]],
  ]);
  if (!s.tied) out.set("output.weight", [s.hidden, VOCAB]);
  for (let i = 0; i < s.layers; i++) {
    const p = `blk.${i}.`;
    out.set(p + "attn_norm.weight", [s.hidden]);
    out.set(p + "attn_q.weight", [s.hidden, s.heads * s.headDim]);
    out.set(p + "attn_k.weight", [s.hidden, s.kvHeads * s.headDim]);
    out.set(p + "attn_v.weight", [s.hidden, s.kvHeads * s.headDim]);
    out.set(p + "attn_output.weight", [s.heads * s.headDim, s.hidden]);
    out.set(p + "attn_q_norm.weight", [s.headDim]);
    out.set(p + "attn_k_norm.weight", [s.headDim]);
    out.set(p + "ffn_norm.weight", [s.hidden]);
    out.set(p + "ffn_gate.weight", [s.hidden, s.ffn]);
    out.set(p + "ffn_up.weight", [s.hidden, s.ffn]);
    out.set(p + "ffn_down.weight", [s.ffn, s.hidden]);
  }
  return out;
}

/** README's type column: norms are F32, `matrix` names the type of every other tensor. */
function checkTable(
  file: GgufFile,
  shape: Shape,
  matrix: (name: string) => string,
): void {
  const shapes = qwen3Shapes(shape);
  const got = Object.fromEntries(file.tensors.map((t) => [t.name, [t.type.name, t.ne]]));
  const want = Object.fromEntries(
    [...shapes].map(([name, ne]) => [name, [ne.length === 1 ? "F32" : matrix(name), ne]]),
  );
  assertEquals(got, want);
}

function checkModelKv(file: GgufFile, shape: Shape): void {
  assertEquals(requireString(file, "general.architecture"), "qwen3");
  assertEquals(requireNumber(file, "qwen3.embedding_length"), shape.hidden);
  assertEquals(requireNumber(file, "qwen3.block_count"), shape.layers);
  assertEquals(requireNumber(file, "qwen3.attention.head_count"), shape.heads);
  assertEquals(requireNumber(file, "qwen3.attention.head_count_kv"), shape.kvHeads);
  assertEquals(requireNumber(file, "qwen3.attention.key_length"), shape.headDim);
  assertEquals(requireNumber(file, "qwen3.feed_forward_length"), shape.ffn);
  assertEquals(requireNumber(file, "qwen3.context_length"), 40960);
  assertEquals(requireNumber(file, "qwen3.rope.freq_base"), 1e6);
  assertEquals(requireNumber(file, "qwen3.attention.layer_norm_rms_epsilon"), Math.fround(1e-6));
}

function withFixture(name: string, fn: (file: GgufFile) => void): void {
  const file = openGguf(fixture(name));
  try {
    fn(file);
  } finally {
    file.close();
  }
}

Deno.test("qwen3-vocab.gguf: tokenizer metadata as llama.cpp's converter writes Qwen3", () => {
  withFixture("qwen3-vocab.gguf", (f) => {
    assertEquals(f.tensors.length, 0);
    const tokens = requireStringArray(f, "tokenizer.ggml.tokens");
    const types = optionalIntArray(f, "tokenizer.ggml.token_type")!;
    assertEquals(tokens.length, VOCAB);
    assertEquals(types.length, VOCAB);
    const pads = tokens.flatMap((t, i) => (/^\[PAD\d+\]$/.test(t) ? [i] : []));
    assertEquals(pads.length, 267);
    assertEquals(pads.every((i) => types[i] === 5), true);
    assertEquals(requireString(f, "tokenizer.ggml.model"), "gpt2");
    assertEquals(requireString(f, "tokenizer.ggml.pre"), "qwen2");
    assertEquals(requireNumber(f, "tokenizer.ggml.eos_token_id"), 151645);
    assertEquals(tokens[151645], "<|im_end|>");
    assertEquals(requireNumber(f, "tokenizer.ggml.bos_token_id"), 151643);
    assertEquals(requireNumber(f, "tokenizer.ggml.padding_token_id"), 151643);
    assertEquals(optionalBool(f, "tokenizer.ggml.add_bos_token"), false);
    assertEquals(requireString(f, "tokenizer.chat_template").includes("<|im_start|>"), true);
  });
});

Deno.test("qwen3-tiny-f16.gguf: F16 matrices, F32 norms, tied output", () => {
  withFixture("qwen3-tiny-f16.gguf", (f) => {
    checkModelKv(f, TINY);
    checkTable(f, TINY, () => "F16");
  });
});

Deno.test("qwen3-tiny-q8_0.gguf: Q8_0 matrices and token_embd, F32 norms", () => {
  withFixture("qwen3-tiny-q8_0.gguf", (f) => {
    checkModelKv(f, TINY);
    checkTable(f, TINY, () => "Q8_0");
  });
});

Deno.test("qwen3-tiny-q4_0.gguf: Q4_0 layer matrices, token_embd Q8_0, F32 norms", () => {
  withFixture("qwen3-tiny-q4_0.gguf", (f) => {
    checkModelKv(f, TINY);
    checkTable(f, TINY, (name) => (name === "token_embd.weight" ? "Q8_0" : "Q4_0"));
  });
});

Deno.test("qwen3-small-q4_k_m.gguf: llama.cpp's Q4_K_M mix with a separate output", () => {
  withFixture("qwen3-small-q4_k_m.gguf", (f) => {
    checkModelKv(f, SMALL);
    const q6 = new Set(["output.weight", "blk.1.attn_v.weight", "blk.1.ffn_down.weight"]);
    checkTable(f, SMALL, (name) => (q6.has(name) ? "Q6_K" : "Q4_K"));
  });
});
