/** How a loaded model presents itself: quantization, sizes, capabilities, defaults. */

import { kvCacheBytes, type KvDType, type KvPoolSpec } from "../../backend/backend.ts";
import type { FrontEnd } from "../../frontend/mod.ts";
import { type GgufFile, optionalNumber } from "../../gguf/mod.ts";
import type { GgufModel } from "../../models/family.ts";
import type { ModelKind } from "../../models/pooling.ts";
import type { ModelRunner } from "../../runner/mod.ts";

/** What a loaded model looks like from outside. */
export interface ModelDescription {
  path: string;
  architecture: string;
  /** e.g. "Q8_0", from general.file_type or the dominant tensor type. */
  quantization: string;
  contextLength: number;
  /** Bytes of weights (mapped) and of the KV cache. */
  weightBytes: number;
  kvBytes: number;
  /** The KV pool: its element type, the positions it holds, the bytes each takes. */
  kv: { type: KvDType; positions: number; bytesPerPosition: number };
  /** Bytes held on the GPU after loading (0 on the CPU). */
  deviceBytes: number;
  vocabSize: number;
  /** Text generation, embeddings or rerank scores (models/pooling.ts). */
  kind: ModelKind;
  /** Width of an embedding (the model's hidden state). */
  embeddingLength: number;
  device: string;
  hasToolCalls: boolean;
  hasReasoning: boolean;
  /** Sampling defaults from the GGUF (`general.sampling.*`). */
  samplingDefaults: { temperature?: number; topK?: number; topP?: number; minP?: number };
}

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
  model: GgufModel,
  frontEnd: FrontEnd,
  runner: ModelRunner,
  contextLength: number,
  kv: KvPoolSpec,
): ModelDescription {
  const file = model.file;
  const bytesPerPosition = kvCacheBytes({ ...model.shape, ...kv, blockSize: 1, nBlocks: 1 });
  return {
    path: file.path ?? "",
    architecture: model.architecture,
    quantization: quantizationOf(file),
    contextLength,
    weightBytes: file.tensorBytes,
    kvBytes: runner.kvBytes,
    kv: { type: kv.dtype, positions: kv.nBlocks * kv.blockSize, bytesPerPosition },
    deviceBytes: runner.deviceBytes(),
    vocabSize: model.shape.vocabSize,
    kind: model.pooling.kind,
    embeddingLength: model.shape.embeddingLength,
    device: runner.device,
    hasToolCalls: frontEnd.hasToolCalls,
    hasReasoning: frontEnd.hasReasoning,
    samplingDefaults: {
      temperature: optionalNumber(file, "general.sampling.temp"),
      topK: optionalNumber(file, "general.sampling.top_k"),
      topP: optionalNumber(file, "general.sampling.top_p"),
      minP: optionalNumber(file, "general.sampling.min_p"),
    },
  };
}
