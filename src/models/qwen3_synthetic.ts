/**
 * Synthetic Qwen3 models: GGUF files with llama.cpp's exact Qwen3 tensor names, shapes,
 * metadata keys and quantization mixes, filled with random weights written directly in
 * quantized form (random valid blocks, never by quantizing f32), so a Qwen3-8B-shaped
 * Q4_K_M file takes seconds, not a download.
 *
 * Weights are scaled so activations stay bounded through any depth: every matrix has
 * RMS 1/sqrt(row length), so each projection of an RMS-normalised input has RMS about 1,
 * and norm weights are near 1. Logits then have RMS about 1.
 */

import {
  byteLevelVocab,
  FILE_TYPES,
  type FileType,
  fillRandomBlocks,
  type GgmlTypeInfo,
  GgufError,
  type GgufKv,
  type GgufLayout,
  type GgufTensorSpec,
  Kv,
  mixTensorType,
  openGguf,
  optionalArray,
  Rng,
  writeGguf,
} from "../gguf/mod.ts";

export interface Qwen3Hparams {
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  vocab: number;
  /** True when the output projection reuses token_embd (no output.weight). */
  tiedOutput: boolean;
  contextLength?: number;
  ropeBase?: number;
  rmsEps?: number;
}

export const QWEN3_SHAPES: Readonly<Record<"qwen3-0.6b" | "qwen3-8b", Qwen3Hparams>> = {
  "qwen3-0.6b": {
    hidden: 1024,
    layers: 28,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    ffn: 3072,
    vocab: 151936,
    tiedOutput: true,
  },
  "qwen3-8b": {
    hidden: 4096,
    layers: 36,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    ffn: 12288,
    vocab: 151936,
    tiedOutput: false,
  },
};

export interface SyntheticQwen3Options {
  shape: keyof typeof QWEN3_SHAPES | Qwen3Hparams;
  /** llama.cpp file type, e.g. "q4_k_m" (Q4_K with Q6_K output and some attn_v/ffn_down). */
  quant: FileType;
  seed?: number;
  /** Copy the `tokenizer.*` metadata of this GGUF; else a minimal byte-level vocabulary. */
  vocabFrom?: string;
  /** general.name; defaults to one naming the shape and quant. */
  name?: string;
}

/** One tensor of the model: name, shape, layer and type, in file order. */
export interface Qwen3TensorPlan {
  name: string;
  ne: number[];
  type: GgmlTypeInfo;
  /** RMS of the random values; norm weights are drawn near 1 instead. */
  rms: number;
  isNorm: boolean;
}

function hparamsOf(shape: SyntheticQwen3Options["shape"]): Qwen3Hparams {
  const hp = typeof shape === "string" ? QWEN3_SHAPES[shape] : shape;
  if (hp === undefined) throw new GgufError("gguf_bad_value", `unknown Qwen3 shape '${shape}'`);
  for (const k of ["hidden", "layers", "heads", "kvHeads", "headDim", "ffn", "vocab"] as const) {
    if (!Number.isSafeInteger(hp[k]) || hp[k] <= 0) {
      throw new GgufError("gguf_bad_value", `Qwen3 ${k} must be a positive integer, got ${hp[k]}`);
    }
  }
  if (hp.heads % hp.kvHeads !== 0) {
    throw new GgufError("gguf_bad_value", `${hp.heads} heads cannot share ${hp.kvHeads} KV heads`);
  }
  return hp;
}

/**
 * Every tensor of a Qwen3 model in the order llama-quantize writes them (output,
 * output_norm, token_embd, then each block's tensors by name), typed by `quant`'s mix.
 */
export function qwen3TensorPlan(hp: Qwen3Hparams, quant: FileType): Qwen3TensorPlan[] {
  const q = hp.heads * hp.headDim;
  const kv = hp.kvHeads * hp.headDim;
  const entries: TensorEntry[] = [];
  if (!hp.tiedOutput) entries.push(["output.weight", [hp.hidden, hp.vocab], undefined]);
  entries.push(["output_norm.weight", [hp.hidden], undefined]);
  entries.push(["token_embd.weight", [hp.hidden, hp.vocab], undefined]);
  for (let i = 0; i < hp.layers; i++) {
    const blk: Array<[string, number[]]> = [
      ["attn_k", [hp.hidden, kv]],
      ["attn_k_norm", [hp.headDim]],
      ["attn_norm", [hp.hidden]],
      ["attn_output", [q, hp.hidden]],
      ["attn_q", [hp.hidden, q]],
      ["attn_q_norm", [hp.headDim]],
      ["attn_v", [hp.hidden, kv]],
      ["ffn_down", [hp.ffn, hp.hidden]],
      ["ffn_gate", [hp.hidden, hp.ffn]],
      ["ffn_norm", [hp.hidden]],
      ["ffn_up", [hp.hidden, hp.ffn]],
    ];
    for (const [name, ne] of blk) entries.push([`blk.${i}.${name}.weight`, ne, i]);
  }
  return typedPlan(entries, hp, quant);
}

/** A tensor before its type: name, shape, layer (none outside the blocks). */
export type TensorEntry = [name: string, ne: number[], layer: number | undefined];

/**
 * `entries` typed by `quant`'s mix as llama-quantize types them, each with the RMS of its
 * random values (1 / sqrt(row length): projections keep activations near RMS 1); vectors
 * (norms, biases) are drawn near 1.
 */
export function typedPlan(
  entries: TensorEntry[],
  hp: Qwen3Hparams,
  quant: FileType,
): Qwen3TensorPlan[] {
  return entries.map(([name, ne, layer]) => ({
    name,
    ne,
    type: mixTensorType(quant, {
      name,
      ne,
      layer,
      nLayers: hp.layers,
      nGqa: hp.heads / hp.kvHeads,
      tiedOutput: hp.tiedOutput,
    }),
    rms: 1 / Math.sqrt(ne[0]),
    isNorm: ne.length === 1,
  }));
}

/** The metadata of a Qwen3 model of shape `hp` (llama.cpp's keys), named `name`. */
export function qwen3ModelKv(
  hp: Qwen3Hparams,
  quant: FileType,
  name: string,
): Array<[string, GgufKv]> {
  return [
    ["general.architecture", Kv.string("qwen3")],
    ["general.type", Kv.string("model")],
    ["general.sampling.top_k", Kv.i32(20)],
    ["general.sampling.top_p", Kv.f32(0.95)],
    ["general.sampling.temp", Kv.f32(0.6)],
    ["general.name", Kv.string(name)],
    ["qwen3.block_count", Kv.u32(hp.layers)],
    ["qwen3.context_length", Kv.u32(hp.contextLength ?? 40960)],
    ["qwen3.embedding_length", Kv.u32(hp.hidden)],
    ["qwen3.feed_forward_length", Kv.u32(hp.ffn)],
    ["qwen3.attention.head_count", Kv.u32(hp.heads)],
    ["qwen3.attention.head_count_kv", Kv.u32(hp.kvHeads)],
    ["qwen3.rope.freq_base", Kv.f32(hp.ropeBase ?? 1e6)],
    ["qwen3.attention.layer_norm_rms_epsilon", Kv.f32(hp.rmsEps ?? 1e-6)],
    ["qwen3.attention.key_length", Kv.u32(hp.headDim)],
    ["qwen3.attention.value_length", Kv.u32(hp.headDim)],
    ["general.file_type", Kv.u32(FILE_TYPES[quant].id)],
    ["general.quantization_version", Kv.u32(2)],
  ];
}

/** The `tokenizer.*` entries of `path`, which must describe exactly `vocab` tokens. */
export function copiedVocab(path: string, vocab: number): Array<[string, GgufKv]> {
  const file = openGguf(path);
  try {
    const tokens = optionalArray(file, "tokenizer.ggml.tokens");
    if (tokens === undefined || tokens.length !== vocab) {
      throw new GgufError(
        "gguf_bad_value",
        `${path} has ${tokens?.length ?? 0} tokens, the model needs ${vocab}`,
      );
    }
    return [...file.kv].filter(([key]) => key.startsWith("tokenizer."));
  } finally {
    file.close();
  }
}

/** Streams random data for one tensor in chunks of about 4 MiB. */
export function randomTensor(t: Qwen3TensorPlan, rng: Rng): GgufTensorSpec["data"] {
  return (write) => {
    const nElements = t.ne.reduce((a, b) => a * b, 1);
    if (t.isNorm) {
      const values = new Float32Array(nElements);
      for (let i = 0; i < nElements; i++) values[i] = rng.uniform(0.9, 1.1);
      write(new Uint8Array(values.buffer));
      return;
    }
    const nBlocks = nElements / t.type.blockSize;
    const perChunk = Math.max(1, Math.floor((4 << 20) / t.type.typeSize));
    const chunk = new Uint8Array(Math.min(nBlocks, perChunk) * t.type.typeSize);
    for (let done = 0; done < nBlocks; done += perChunk) {
      const part = chunk.subarray(0, Math.min(perChunk, nBlocks - done) * t.type.typeSize);
      fillRandomBlocks(t.type, part, rng, t.rms);
      write(part);
    }
  };
}

/**
 * Writes a Qwen3-architecture GGUF with random weights to `path` and returns its layout.
 * The same options and seed always give the same bytes.
 */
export function writeSyntheticQwen3(path: string, options: SyntheticQwen3Options): GgufLayout {
  const hp = hparamsOf(options.shape);
  if (!(options.quant in FILE_TYPES)) {
    throw new GgufError("gguf_bad_value", `unknown quantization '${options.quant}'`);
  }
  const shapeName = typeof options.shape === "string" ? options.shape : "custom";
  const name = options.name ?? `Qwen3 synthetic ${shapeName} ${options.quant}`;
  const vocab = options.vocabFrom === undefined
    ? byteLevelVocab(hp.vocab)
    : copiedVocab(options.vocabFrom, hp.vocab);
  const seed = options.seed ?? 0;
  const plan = qwen3TensorPlan(hp, options.quant);
  const tensors = plan.map((t, i): GgufTensorSpec => ({
    name: t.name,
    type: t.type,
    ne: t.ne,
    // One stream per tensor, so a tensor's values do not depend on the others' types.
    data: randomTensor(t, new Rng((Math.imul(seed, 0x9e3779b1) + i) >>> 0)),
  }));
  return writeGguf(path, { kv: [...qwen3ModelKv(hp, options.quant, name), ...vocab], tensors });
}
