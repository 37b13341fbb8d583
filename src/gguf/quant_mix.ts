/**
 * llama.cpp's quantization mixes (`llama_tensor_get_type` in src/llama-quant.cpp, no
 * importance matrix, dense models): which ggml type each weight of a model gets for a
 * given file type such as Q4_K_M, so a file we write looks like one llama-quantize wrote.
 */

import { GgufError } from "./errors.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo } from "./types.ts";

/** File types (`general.file_type`, llama.cpp's `llama_ftype`) and their base tensor type. */
export const FILE_TYPES = {
  f32: { id: 0, base: GgmlType.F32 },
  f16: { id: 1, base: GgmlType.F16 },
  q4_0: { id: 2, base: GgmlType.Q4_0 },
  q4_1: { id: 3, base: GgmlType.Q4_1 },
  q8_0: { id: 7, base: GgmlType.Q8_0 },
  q5_0: { id: 8, base: GgmlType.Q5_0 },
  q5_1: { id: 9, base: GgmlType.Q5_1 },
  q2_k: { id: 10, base: GgmlType.Q2_K },
  q3_k_s: { id: 11, base: GgmlType.Q3_K },
  q3_k_m: { id: 12, base: GgmlType.Q3_K },
  q3_k_l: { id: 13, base: GgmlType.Q3_K },
  q4_k_s: { id: 14, base: GgmlType.Q4_K },
  q4_k_m: { id: 15, base: GgmlType.Q4_K },
  q5_k_s: { id: 16, base: GgmlType.Q5_K },
  q5_k_m: { id: 17, base: GgmlType.Q5_K },
  q6_k: { id: 18, base: GgmlType.Q6_K },
  bf16: { id: 32, base: GgmlType.BF16 },
} as const;

export type FileType = keyof typeof FILE_TYPES;

/** What the mix rules need to know about one tensor and its model. */
export interface MixTensor {
  name: string;
  ne: number[];
  /** Layer index of per-layer tensors (attn_v, ffn_down, ...). */
  layer?: number;
  nLayers: number;
  /** Query heads per KV head. */
  nGqa: number;
  /** True when the model has no output.weight, so token_embd doubles as the output. */
  tiedOutput: boolean;
}

const QUANTIZED = new Set<number>([
  GgmlType.Q4_0,
  GgmlType.Q4_1,
  GgmlType.Q5_0,
  GgmlType.Q5_1,
  GgmlType.Q8_0,
  GgmlType.Q2_K,
  GgmlType.Q3_K,
  GgmlType.Q4_K,
  GgmlType.Q5_K,
  GgmlType.Q6_K,
]);

/** Layers that get more bits in the *_M mixes: the first and last eighth, and every third. */
function useMoreBits(i: number, n: number): boolean {
  const eighth = Math.floor(n / 8);
  return i < eighth || i >= Math.floor((7 * n) / 8) || (i - eighth) % 3 === 2;
}

/**
 * llama-quantize leaves 1-D tensors, norms and mixture-of-experts routers in their original
 * (f32) type.
 */
function isQuantizable(t: MixTensor): boolean {
  return t.ne.length >= 2 && t.name.endsWith("weight") && !t.name.includes("_norm.weight") &&
    !t.name.includes("ffn_gate_inp.weight");
}

function block(id: number): number {
  return ggmlTypeInfo(id)!.blockSize;
}

function mixed(ft: FileType, t: MixTensor, base: number): number {
  const { Q3_K, Q4_K, Q5_K, Q6_K, Q8_0 } = GgmlType;
  const i = t.layer ?? 0;
  const n = t.nLayers;
  if (t.name === "output.weight" || (t.tiedOutput && t.name === "token_embd.weight")) {
    if (t.ne[0] % block(base) !== 0) return Q8_0;
    return base === Q8_0 ? Q8_0 : Q6_K;
  }
  if (t.name.includes("attn_v.weight")) {
    if (ft === "q2_k") return t.nGqa >= 4 ? Q4_K : Q3_K;
    if (ft === "q3_k_m") return i < 2 ? Q5_K : Q4_K;
    if (ft === "q3_k_l") return Q5_K;
    if ((ft === "q4_k_m" || ft === "q5_k_m") && useMoreBits(i, n)) return Q6_K;
    if (ft === "q4_k_s" && i < 4) return Q5_K;
    return base;
  }
  if (t.name.includes("ffn_down")) {
    if (ft === "q2_k") return Q3_K;
    if (ft === "q3_k_m") return i < Math.floor(n / 16) ? Q5_K : Q4_K;
    if (ft === "q3_k_l") return Q5_K;
    if ((ft === "q4_k_m" || ft === "q5_k_m") && useMoreBits(i, n)) return Q6_K;
    if (ft === "q4_k_s" && i < Math.floor(n / 8)) return Q5_K;
    return base;
  }
  if (t.name.includes("attn_output.weight")) {
    if (ft === "q2_k") return Q3_K;
    if (ft === "q3_k_m") return Q4_K;
    if (ft === "q3_k_l") return Q5_K;
  }
  return base;
}

/** Rows that are not whole super-blocks fall back to a 32-value type, as in llama.cpp. */
function fallback(t: MixTensor, type: number): number {
  if (t.ne[0] % block(type) === 0) return type;
  const { Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q5_1, Q8_0, F16 } = GgmlType;
  const to = new Map<number, number>([
    [Q2_K, Q4_0],
    [Q3_K, Q4_0],
    [Q4_K, Q5_0],
    [Q5_K, Q5_1],
    [Q6_K, Q8_0],
  ]).get(type);
  if (to === undefined) {
    throw new GgufError(
      "gguf_bad_tensor",
      `'${t.name}' rows of ${t.ne[0]} cannot be ${ggmlTypeInfo(type)!.name} (blocks of ${
        block(type)
      })`,
    );
  }
  return t.ne[0] % block(to) === 0 ? to : F16;
}

/** The type llama-quantize would give tensor `t` in a file of type `ft`. */
export function mixTensorType(ft: FileType, t: MixTensor): GgmlTypeInfo {
  const base = FILE_TYPES[ft].base;
  if (!isQuantizable(t)) return ggmlTypeInfo(GgmlType.F32)!;
  if (!QUANTIZED.has(base)) return ggmlTypeInfo(base)!;
  return ggmlTypeInfo(fallback(t, mixed(ft, t, base)))!;
}
