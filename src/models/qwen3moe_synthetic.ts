/**
 * Synthetic Qwen3-MoE models (qwen3_synthetic.ts's method): llama.cpp's qwen3moe tensor
 * names, shapes, metadata keys and quantization mixes (routers kept in f32, down
 * projections of the *_M mixes' "more bits" layers in Q6_K), random weights written
 * directly in quantized form. With random routers every expert is about as likely.
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
  copiedVocab,
  type Qwen3Hparams,
  type Qwen3TensorPlan,
  randomTensor,
  type TensorEntry,
  typedPlan,
} from "./qwen3_synthetic.ts";

/** A Qwen3-MoE shape: `ffn` is only written (feed_forward_length), experts are what run. */
export interface Qwen3MoeHparams extends Qwen3Hparams {
  experts: number;
  expertsUsed: number;
  expertFfn: number;
}

export const QWEN3MOE_SHAPES: Readonly<
  Record<"qwen3moe-mini" | "qwen3-30b-a3b", Qwen3MoeHparams>
> = {
  /** 2.85B parameters, 1.76 GB at Q4_K_M, 0.39 GB read per token: a 2-core, 24 GiB machine runs it. */
  "qwen3moe-mini": {
    hidden: 1024,
    layers: 24,
    heads: 16,
    kvHeads: 4,
    headDim: 128,
    ffn: 3072,
    experts: 64,
    expertsUsed: 8,
    expertFfn: 512,
    vocab: 151936,
    tiedOutput: false,
  },
  /** Qwen3-30B-A3B and Qwen3-Coder-30B-A3B: 18.55 GB at Q4_K_M, 1.92 GB read per token. */
  "qwen3-30b-a3b": {
    hidden: 2048,
    layers: 48,
    heads: 32,
    kvHeads: 4,
    headDim: 128,
    ffn: 6144,
    experts: 128,
    expertsUsed: 8,
    expertFfn: 768,
    vocab: 151936,
    tiedOutput: false,
    contextLength: 262144,
    ropeBase: 1e7,
  },
};

export interface SyntheticQwen3MoeOptions {
  shape: keyof typeof QWEN3MOE_SHAPES | Qwen3MoeHparams;
  quant: FileType;
  seed?: number;
  /** Copy the `tokenizer.*` metadata of this GGUF; else a minimal byte-level vocabulary. */
  vocabFrom?: string;
  name?: string;
}

function hparamsOf(shape: SyntheticQwen3MoeOptions["shape"]): Qwen3MoeHparams {
  const hp = typeof shape === "string" ? QWEN3MOE_SHAPES[shape] : shape;
  if (hp === undefined) throw new GgufError("gguf_bad_value", `unknown Qwen3-MoE shape '${shape}'`);
  const counts = ["hidden", "layers", "heads", "kvHeads", "headDim", "experts", "expertFfn"];
  for (const k of [...counts, "expertsUsed", "vocab"] as const) {
    const v = hp[k as keyof Qwen3MoeHparams];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0) {
      throw new GgufError("gguf_bad_value", `Qwen3-MoE ${k} must be a positive integer, got ${v}`);
    }
  }
  if (hp.expertsUsed > hp.experts || hp.heads % hp.kvHeads !== 0) {
    throw new GgufError("gguf_bad_value", "Qwen3-MoE: bad expert or head counts");
  }
  return hp;
}

/** Every tensor of a Qwen3-MoE model in the order llama-quantize writes them, typed by `quant`. */
export function qwen3moeTensorPlan(hp: Qwen3MoeHparams, quant: FileType): Qwen3TensorPlan[] {
  const q = hp.heads * hp.headDim;
  const kv = hp.kvHeads * hp.headDim;
  const { hidden, expertFfn: ff, experts } = hp;
  const entries: TensorEntry[] = [];
  if (!hp.tiedOutput) entries.push(["output.weight", [hidden, hp.vocab], undefined]);
  entries.push(["output_norm.weight", [hidden], undefined]);
  entries.push(["token_embd.weight", [hidden, hp.vocab], undefined]);
  for (let i = 0; i < hp.layers; i++) {
    const blk: Array<[string, number[]]> = [
      ["attn_k", [hidden, kv]],
      ["attn_k_norm", [hp.headDim]],
      ["attn_norm", [hidden]],
      ["attn_output", [q, hidden]],
      ["attn_q", [hidden, q]],
      ["attn_q_norm", [hp.headDim]],
      ["attn_v", [hidden, kv]],
      ["ffn_down_exps", [ff, hidden, experts]],
      ["ffn_gate_exps", [hidden, ff, experts]],
      ["ffn_gate_inp", [hidden, experts]],
      ["ffn_norm", [hidden]],
      ["ffn_up_exps", [hidden, ff, experts]],
    ];
    for (const [name, ne] of blk) entries.push([`blk.${i}.${name}.weight`, ne, i]);
  }
  return typedPlan(entries, hp, quant);
}

/** The metadata of a Qwen3-MoE file as llama.cpp's converter writes it. */
export function qwen3moeKv(
  hp: Qwen3MoeHparams,
  quant: FileType,
  name: string,
): Array<[string, GgufKv]> {
  const a = "qwen3moe";
  return [
    ["general.architecture", Kv.string(a)],
    ["general.type", Kv.string("model")],
    ["general.name", Kv.string(name)],
    [`${a}.block_count`, Kv.u32(hp.layers)],
    [`${a}.context_length`, Kv.u32(hp.contextLength ?? 40960)],
    [`${a}.embedding_length`, Kv.u32(hp.hidden)],
    [`${a}.feed_forward_length`, Kv.u32(hp.ffn)],
    [`${a}.attention.head_count`, Kv.u32(hp.heads)],
    [`${a}.attention.head_count_kv`, Kv.u32(hp.kvHeads)],
    [`${a}.rope.freq_base`, Kv.f32(hp.ropeBase ?? 1e6)],
    [`${a}.attention.layer_norm_rms_epsilon`, Kv.f32(hp.rmsEps ?? 1e-6)],
    [`${a}.expert_used_count`, Kv.u32(hp.expertsUsed)],
    [`${a}.attention.key_length`, Kv.u32(hp.headDim)],
    [`${a}.attention.value_length`, Kv.u32(hp.headDim)],
    [`${a}.expert_count`, Kv.u32(hp.experts)],
    [`${a}.expert_feed_forward_length`, Kv.u32(hp.expertFfn)],
    ["general.file_type", Kv.u32(FILE_TYPES[quant].id)],
    ["general.quantization_version", Kv.u32(2)],
  ];
}

/**
 * Writes a Qwen3-MoE GGUF with random weights to `path` and returns its layout. The same
 * options and seed always give the same bytes.
 */
export function writeSyntheticQwen3Moe(
  path: string,
  options: SyntheticQwen3MoeOptions,
): GgufLayout {
  const hp = hparamsOf(options.shape);
  if (!(options.quant in FILE_TYPES)) {
    throw new GgufError("gguf_bad_value", `unknown quantization '${options.quant}'`);
  }
  const shapeName = typeof options.shape === "string" ? options.shape : "custom";
  const name = options.name ?? `Qwen3-MoE synthetic ${shapeName} ${options.quant}`;
  const vocab = options.vocabFrom === undefined
    ? byteLevelVocab(hp.vocab)
    : copiedVocab(options.vocabFrom, hp.vocab);
  const seed = options.seed ?? 0;
  const tensors = qwen3moeTensorPlan(hp, options.quant).map((t, i): GgufTensorSpec => ({
    name: t.name,
    type: t.type,
    ne: t.ne,
    data: randomTensor(t, new Rng((Math.imul(seed, 0x9e3779b1) + i) >>> 0)),
  }));
  return writeGguf(path, { kv: [...qwen3moeKv(hp, options.quant, name), ...vocab], tensors });
}
