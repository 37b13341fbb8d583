/**
 * The ggml tensor type table: id, name, values per block and bytes per block, as in
 * ggml.h / ggml.c (`type_traits`). Ids of removed types (4, 5, 31-33, 36-38) are absent,
 * so a file that uses one is rejected as an unknown type.
 */

import { GgufError } from "./errors.ts";

export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  IQ2_XXS: 16,
  IQ2_XS: 17,
  IQ3_XXS: 18,
  IQ1_S: 19,
  IQ4_NL: 20,
  IQ3_S: 21,
  IQ2_S: 22,
  IQ4_XS: 23,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  IQ1_M: 29,
  BF16: 30,
  TQ1_0: 34,
  TQ2_0: 35,
  MXFP4: 39,
} as const;

export type GgmlTypeName = keyof typeof GgmlType;
export type GgmlTypeId = (typeof GgmlType)[GgmlTypeName];

export interface GgmlTypeInfo {
  id: GgmlTypeId;
  name: GgmlTypeName;
  /** Values per block (1 for plain types). */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
}

const TRAITS: Array<[GgmlTypeName, number, number]> = [
  ["F32", 1, 4],
  ["F16", 1, 2],
  ["Q4_0", 32, 18],
  ["Q4_1", 32, 20],
  ["Q5_0", 32, 22],
  ["Q5_1", 32, 24],
  ["Q8_0", 32, 34],
  ["Q8_1", 32, 36],
  ["Q2_K", 256, 84],
  ["Q3_K", 256, 110],
  ["Q4_K", 256, 144],
  ["Q5_K", 256, 176],
  ["Q6_K", 256, 210],
  ["Q8_K", 256, 292],
  ["IQ2_XXS", 256, 66],
  ["IQ2_XS", 256, 74],
  ["IQ3_XXS", 256, 98],
  ["IQ1_S", 256, 50],
  ["IQ4_NL", 32, 18],
  ["IQ3_S", 256, 110],
  ["IQ2_S", 256, 82],
  ["IQ4_XS", 256, 136],
  ["I8", 1, 1],
  ["I16", 1, 2],
  ["I32", 1, 4],
  ["I64", 1, 8],
  ["F64", 1, 8],
  ["IQ1_M", 256, 56],
  ["BF16", 1, 2],
  ["TQ1_0", 256, 54],
  ["TQ2_0", 256, 66],
  ["MXFP4", 32, 17],
];

const BY_ID = new Map<number, GgmlTypeInfo>(
  TRAITS.map(([name, blockSize, typeSize]) => [
    GgmlType[name],
    { id: GgmlType[name], name, blockSize, typeSize },
  ]),
);

/** The traits of type `id`, or undefined for an id ggml does not define. */
export function ggmlTypeInfo(id: number): GgmlTypeInfo | undefined {
  return BY_ID.get(id);
}

/** The traits of `type` (traits or id); an id ggml does not define is a GgufError. */
export function requireGgmlType(type: GgmlTypeInfo | number): GgmlTypeInfo {
  const info = typeof type === "number" ? ggmlTypeInfo(type) : type;
  if (info === undefined) {
    throw new GgufError("gguf_unknown_tensor_type", `unknown ggml type ${String(type)}`);
  }
  return info;
}

/** Every defined type, in id order. */
export function ggmlTypes(): GgmlTypeInfo[] {
  return [...BY_ID.values()].sort((a, b) => a.id - b.id);
}

/** The traits of the type named `name` (e.g. "Q4_K"). */
export function ggmlTypeByName(name: string): GgmlTypeInfo | undefined {
  const id = (GgmlType as Record<string, number>)[name];
  return id === undefined ? undefined : BY_ID.get(id);
}

/**
 * Bytes used by `n` values of a type whose rows are `n` long; `n` must be a multiple of
 * the block size (ggml stores whole blocks only).
 */
export function rowBytes(info: GgmlTypeInfo, n: number): number {
  return (n / info.blockSize) * info.typeSize;
}

/** GGUF metadata value types (gguf.h `gguf_type`). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

export type GgufValueTypeId = (typeof GgufValueType)[keyof typeof GgufValueType];

/** Encoded bytes of each fixed-size GGUF value type (strings and arrays vary). */
export const GGUF_SCALAR_SIZE: Readonly<Partial<Record<number, number>>> = {
  [GgufValueType.UINT8]: 1,
  [GgufValueType.INT8]: 1,
  [GgufValueType.UINT16]: 2,
  [GgufValueType.INT16]: 2,
  [GgufValueType.UINT32]: 4,
  [GgufValueType.INT32]: 4,
  [GgufValueType.FLOAT32]: 4,
  [GgufValueType.BOOL]: 1,
  [GgufValueType.UINT64]: 8,
  [GgufValueType.INT64]: 8,
  [GgufValueType.FLOAT64]: 8,
};
