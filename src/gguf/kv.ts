/**
 * Typed metadata values for the writer: GGUF keeps the exact type of every value (u32 vs
 * i32 vs f32, array element types), and llama.cpp rejects a key whose type differs from
 * what it expects, so values are built with their type rather than inferred.
 */

import type { GgufArray, GgufKv } from "./file.ts";
import { GgufValueType, type GgufValueTypeId } from "./types.ts";

export const Kv = {
  u8: (value: number): GgufKv => ({ type: GgufValueType.UINT8, value }),
  i8: (value: number): GgufKv => ({ type: GgufValueType.INT8, value }),
  u16: (value: number): GgufKv => ({ type: GgufValueType.UINT16, value }),
  i16: (value: number): GgufKv => ({ type: GgufValueType.INT16, value }),
  u32: (value: number): GgufKv => ({ type: GgufValueType.UINT32, value }),
  i32: (value: number): GgufKv => ({ type: GgufValueType.INT32, value }),
  u64: (value: number | bigint): GgufKv => ({ type: GgufValueType.UINT64, value }),
  i64: (value: number | bigint): GgufKv => ({ type: GgufValueType.INT64, value }),
  f32: (value: number): GgufKv => ({ type: GgufValueType.FLOAT32, value }),
  f64: (value: number): GgufKv => ({ type: GgufValueType.FLOAT64, value }),
  bool: (value: boolean): GgufKv => ({ type: GgufValueType.BOOL, value }),
  string: (value: string): GgufKv => ({ type: GgufValueType.STRING, value }),
  /** An array of `arrayType` elements (typed array, or plain numbers checked on write). */
  array: (arrayType: GgufValueTypeId, value: GgufArray | number[]): GgufKv => ({
    type: GgufValueType.ARRAY,
    arrayType,
    value: value as GgufArray,
  }),
  strings: (value: string[]): GgufKv => ({
    type: GgufValueType.ARRAY,
    arrayType: GgufValueType.STRING,
    value,
  }),
} as const;
