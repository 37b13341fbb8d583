/** How a loaded model presents itself: quantization, sizes, capabilities, defaults. */

import { type GgufFile, optionalNumber, optionalString } from "../gguf/mod.ts";
import type { Qwen3Hparams } from "../models/qwen3.ts";
import type { Tokenizer } from "../tokenizer/mod.ts";
import type { ModelDescription } from "./protocol.ts";

/** llama.cpp's `general.file_type` values (llama_ftype) for the types neuron loads. */
const FILE_TYPES: Record<number, string> = {
  0: "F32",
  1: "F16",
  2: "Q4_0",
  3: "Q4_1",
  7: "Q8_0",
  8: "Q5_0",
  9: "Q5_1",
  10: "Q2_K",
  11: "Q3_K_S",
  12: "Q3_K_M",
  13: "Q3_K_L",
  14: "Q4_K_S",
  15: "Q4_K_M",
  16: "Q5_K_S",
  17: "Q5_K_M",
  18: "Q6_K",
  32: "BF16",
};

/** The quantization name: from `general.file_type`, else the most common matrix type. */
export function quantizationOf(file: GgufFile): string {
  const ft = optionalNumber(file, "general.file_type");
  if (ft !== undefined && FILE_TYPES[ft]) return FILE_TYPES[ft];
  const bytesByType = new Map<string, number>();
  for (const t of file.tensors) {
    if (t.ne.length < 2) continue;
    bytesByType.set(t.type.name, (bytesByType.get(t.type.name) ?? 0) + t.nBytes);
  }
  return [...bytesByType.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "unknown";
}

export function describeModel(
  file: GgufFile,
  hp: Qwen3Hparams,
  contextLength: number,
  kvBytes: number,
  device: string,
  tokenizer: Tokenizer,
): Omit<ModelDescription, "deviceBytes"> {
  const has = (...texts: string[]): boolean =>
    texts.every((t) => tokenizer.tokenId(t) !== undefined);
  return {
    path: file.path ?? "",
    architecture: optionalString(file, "general.architecture") ?? "qwen3",
    quantization: quantizationOf(file),
    contextLength,
    weightBytes: file.tensors.reduce((sum, t) => sum + t.nBytes, 0),
    kvBytes,
    vocabSize: hp.vocabSize,
    device,
    hasToolCalls: has("<tool_call>", "</tool_call>"),
    hasReasoning: has("<think>", "</think>"),
    samplingDefaults: {
      temperature: optionalNumber(file, "general.sampling.temp"),
      topK: optionalNumber(file, "general.sampling.top_k"),
      topP: optionalNumber(file, "general.sampling.top_p"),
      minP: optionalNumber(file, "general.sampling.min_p"),
    },
  };
}
