/**
 * Synthetic Llama, Qwen2 and Gemma 3 models for benchmarks (qwen3_synthetic.ts's method):
 * llama.cpp's tensor names, shapes, metadata keys and quantization mixes for each
 * architecture, random weights written directly in quantized form, a byte-level vocabulary.
 */

import {
  byteLevelVocab,
  FILE_TYPES,
  type FileType,
  GgufError,
  type GgufKv,
  type GgufLayout,
  type GgufTensorSpec,
  Kv,
  Rng,
  writeGguf,
} from "../gguf/mod.ts";
import {
  type Qwen3Hparams,
  type Qwen3TensorPlan,
  randomTensor,
  type TensorEntry,
  typedPlan,
} from "./qwen3_synthetic.ts";

export interface DenseShape extends Qwen3Hparams {
  arch: "llama" | "qwen2" | "gemma3";
  /** Gemma 3's local layers' window (0: none). */
  slidingWindow?: number;
}

export const DENSE_SHAPES: Readonly<
  Record<"llama3-1b" | "qwen2.5-0.5b" | "gemma3-1b", DenseShape>
> = {
  /** Llama 3.2 1B. */
  "llama3-1b": {
    arch: "llama",
    hidden: 2048,
    layers: 16,
    heads: 32,
    kvHeads: 8,
    headDim: 64,
    ffn: 8192,
    vocab: 128256,
    tiedOutput: true,
    contextLength: 131072,
    ropeBase: 500000,
    rmsEps: 1e-5,
  },
  /** Qwen2.5 0.5B. */
  "qwen2.5-0.5b": {
    arch: "qwen2",
    hidden: 896,
    layers: 24,
    heads: 14,
    kvHeads: 2,
    headDim: 64,
    ffn: 4864,
    vocab: 151936,
    tiedOutput: true,
    contextLength: 32768,
    ropeBase: 1e6,
    rmsEps: 1e-6,
  },
  /** Gemma 3 1B. */
  "gemma3-1b": {
    arch: "gemma3",
    hidden: 1152,
    layers: 26,
    heads: 4,
    kvHeads: 1,
    headDim: 256,
    ffn: 6912,
    vocab: 262144,
    tiedOutput: true,
    contextLength: 32768,
    ropeBase: 1e6,
    rmsEps: 1e-6,
    slidingWindow: 512,
  },
};

/** The block tensors of `arch` beyond Llama's, with their shapes. */
function extraBlockTensors(s: DenseShape): Array<[string, number[]]> {
  const q = s.heads * s.headDim, kv = s.kvHeads * s.headDim;
  if (s.arch === "qwen2") {
    return [["attn_q.bias", [q]], ["attn_k.bias", [kv]], ["attn_v.bias", [kv]]];
  }
  if (s.arch === "gemma3") {
    return [
      ["attn_q_norm.weight", [s.headDim]],
      ["attn_k_norm.weight", [s.headDim]],
      ["post_attention_norm.weight", [s.hidden]],
      ["post_ffw_norm.weight", [s.hidden]],
    ];
  }
  return [];
}

/** Every tensor, typed by `quant`'s mix as llama-quantize types them. */
function densePlan(s: DenseShape, quant: FileType): Qwen3TensorPlan[] {
  const q = s.heads * s.headDim, kv = s.kvHeads * s.headDim;
  const entries: TensorEntry[] = [];
  if (!s.tiedOutput) entries.push(["output.weight", [s.hidden, s.vocab], undefined]);
  entries.push(["output_norm.weight", [s.hidden], undefined]);
  entries.push(["token_embd.weight", [s.hidden, s.vocab], undefined]);
  for (let i = 0; i < s.layers; i++) {
    const blk: Array<[string, number[]]> = [
      ["attn_norm.weight", [s.hidden]],
      ["attn_q.weight", [s.hidden, q]],
      ["attn_k.weight", [s.hidden, kv]],
      ["attn_v.weight", [s.hidden, kv]],
      ["attn_output.weight", [q, s.hidden]],
      ["ffn_norm.weight", [s.hidden]],
      ["ffn_gate.weight", [s.hidden, s.ffn]],
      ["ffn_up.weight", [s.hidden, s.ffn]],
      ["ffn_down.weight", [s.ffn, s.hidden]],
      ...extraBlockTensors(s),
    ];
    for (const [name, ne] of blk) entries.push([`blk.${i}.${name}`, ne, i]);
  }
  return typedPlan(entries, s, quant);
}

function denseKv(s: DenseShape, quant: FileType, name: string): Array<[string, GgufKv]> {
  const a = s.arch;
  const kv: Array<[string, GgufKv]> = [
    ["general.architecture", Kv.string(a)],
    ["general.type", Kv.string("model")],
    ["general.name", Kv.string(name)],
    [`${a}.block_count`, Kv.u32(s.layers)],
    [`${a}.context_length`, Kv.u32(s.contextLength ?? 32768)],
    [`${a}.embedding_length`, Kv.u32(s.hidden)],
    [`${a}.feed_forward_length`, Kv.u32(s.ffn)],
    [`${a}.attention.head_count`, Kv.u32(s.heads)],
    [`${a}.attention.head_count_kv`, Kv.u32(s.kvHeads)],
    [`${a}.attention.key_length`, Kv.u32(s.headDim)],
    [`${a}.attention.value_length`, Kv.u32(s.headDim)],
    [`${a}.rope.freq_base`, Kv.f32(s.ropeBase ?? 10000)],
    [`${a}.attention.layer_norm_rms_epsilon`, Kv.f32(s.rmsEps ?? 1e-6)],
    ["general.file_type", Kv.u32(FILE_TYPES[quant].id)],
    ["general.quantization_version", Kv.u32(2)],
  ];
  if (s.slidingWindow) kv.push([`${a}.attention.sliding_window`, Kv.u32(s.slidingWindow)]);
  return kv;
}

/** Writes a synthetic model of `shape` to `path`; the same seed always gives the same bytes. */
export function writeSyntheticDense(
  path: string,
  options: { shape: keyof typeof DENSE_SHAPES; quant: FileType; seed?: number },
): GgufLayout {
  const s = DENSE_SHAPES[options.shape];
  if (s === undefined) throw new GgufError("gguf_bad_value", `unknown shape '${options.shape}'`);
  if (!(options.quant in FILE_TYPES)) {
    throw new GgufError("gguf_bad_value", `unknown quantization '${options.quant}'`);
  }
  const seed = options.seed ?? 0;
  const name = `synthetic ${options.shape} ${options.quant}`;
  const tensors = densePlan(s, options.quant).map((t, i): GgufTensorSpec => ({
    name: t.name,
    type: t.type,
    ne: t.ne,
    data: randomTensor(t, new Rng((Math.imul(seed, 0x9e3779b1) + i) >>> 0)),
  }));
  return writeGguf(path, {
    kv: [...denseKv(s, options.quant, name), ...byteLevelVocab(s.vocab)],
    tensors,
  });
}
