/**
 * GGUF files: zero-copy reader, writer, ggml type table, typed metadata access,
 * reference dequantizers and quantizers, random blocks and llama.cpp's quantization mixes.
 */
export { GGUF_ERROR_CODES, GgufError, type GgufErrorCode } from "./errors.ts";
export {
  GGML_MAX_DIMS,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  type GgufArray,
  GgufFile,
  type GgufKv,
  type GgufScalar,
  type GgufTensorInfo,
  type GgufValue,
} from "./file.ts";
export { openGguf, parseGguf, parseGgufBytes } from "./reader.ts";
export { type ByteSource, memorySource, openSource, type SourceOptions } from "./source.ts";
export {
  GgmlType,
  ggmlTypeByName,
  type GgmlTypeId,
  type GgmlTypeInfo,
  ggmlTypeInfo,
  type GgmlTypeName,
  ggmlTypes,
  GGUF_SCALAR_SIZE,
  GgufValueType,
  type GgufValueTypeId,
  rowBytes,
} from "./types.ts";
export * from "./metadata.ts";
export { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "./half.ts";
export { Rng } from "./rng.ts";
export { Kv } from "./kv.ts";
export {
  type ChunkSink,
  encodeGguf,
  type GgufLayout,
  type GgufSpec,
  type GgufTensorSpec,
  type GgufWrittenTensor,
  writeGguf,
} from "./writer.ts";
export { canDequantize, DEQUANTIZABLE_TYPES, dequantize, dequantizeRow } from "./dequant/mod.ts";
export {
  canRandomize,
  fillRandomBlocks,
  QUANTIZABLE_TYPES,
  quantize,
  quantizeRow,
  randomBlocks,
} from "./quant/mod.ts";
export { FILE_TYPES, type FileType, type MixTensor, mixTensorType } from "./quant_mix.ts";
export { byteLevelVocab, MIN_BYTE_VOCAB } from "./byte_vocab.ts";
