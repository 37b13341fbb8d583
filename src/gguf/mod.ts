/** GGUF files: zero-copy reader, ggml type table, typed metadata access. */
export { GgufError, type GgufErrorCode } from "./errors.ts";
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
  openGguf,
  parseGguf,
  parseGgufBytes,
} from "./reader.ts";
export { type ByteSource, memorySource, openSource } from "./source.ts";
export {
  GgmlType,
  ggmlTypeByName,
  type GgmlTypeId,
  type GgmlTypeInfo,
  ggmlTypeInfo,
  type GgmlTypeName,
  ggmlTypes,
  GgufValueType,
  type GgufValueTypeId,
  rowBytes,
} from "./types.ts";
export * from "./metadata.ts";
