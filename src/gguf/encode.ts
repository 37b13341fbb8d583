/**
 * Encodes GGUF metadata and tensor infos into bytes, checking that every value fits the
 * type it claims (a u8 of 300 or an i32 of 1.5 is a GgufError, not a silently wrapped
 * number).
 */

import { GgufError } from "./errors.ts";
import type { GgufArray, GgufKv, GgufValue } from "./file.ts";
import { GgufValueType, type GgufValueTypeId } from "./types.ts";

const encoder = new TextEncoder();

/** A growable little-endian byte buffer. */
export class ByteBuilder {
  #buf = new Uint8Array(1 << 16);
  #dv = new DataView(this.#buf.buffer);
  length = 0;

  #reserve(n: number): number {
    const at = this.length;
    if (at + n > this.#buf.byteLength) {
      const grown = new Uint8Array(Math.max(at + n, this.#buf.byteLength * 2));
      grown.set(this.#buf.subarray(0, at));
      this.#buf = grown;
      this.#dv = new DataView(grown.buffer);
    }
    this.length += n;
    return at;
  }

  u8(v: number): void {
    const at = this.#reserve(1);
    this.#dv.setUint8(at, v);
  }
  i8(v: number): void {
    const at = this.#reserve(1);
    this.#dv.setInt8(at, v);
  }
  u16(v: number): void {
    const at = this.#reserve(2);
    this.#dv.setUint16(at, v, true);
  }
  i16(v: number): void {
    const at = this.#reserve(2);
    this.#dv.setInt16(at, v, true);
  }
  u32(v: number): void {
    const at = this.#reserve(4);
    this.#dv.setUint32(at, v, true);
  }
  i32(v: number): void {
    const at = this.#reserve(4);
    this.#dv.setInt32(at, v, true);
  }
  f32(v: number): void {
    const at = this.#reserve(4);
    this.#dv.setFloat32(at, v, true);
  }
  f64(v: number): void {
    const at = this.#reserve(8);
    this.#dv.setFloat64(at, v, true);
  }
  u64(v: bigint): void {
    const at = this.#reserve(8);
    this.#dv.setBigUint64(at, v, true);
  }
  i64(v: bigint): void {
    const at = this.#reserve(8);
    this.#dv.setBigInt64(at, v, true);
  }
  bytes(b: Uint8Array): void {
    const at = this.#reserve(b.byteLength);
    this.#buf.set(b, at);
  }
  /** u64 byte length + UTF-8, encoded in place (a UTF-16 unit takes at most 3 bytes). */
  string(s: string): void {
    const max = s.length * 3;
    const at = this.#reserve(8 + max);
    const { written } = encoder.encodeInto(s, this.#buf.subarray(at + 8, at + 8 + max));
    this.#dv.setUint32(at, written, true);
    this.#dv.setUint32(at + 4, 0, true);
    this.length = at + 8 + written;
  }
  /** Zero bytes up to the next multiple of `alignment`. */
  pad(alignment: number): void {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.#reserve(n);
    this.#buf.fill(0, this.length - n, this.length);
  }

  /** The bytes written so far (a view; copy it before writing more). */
  view(): Uint8Array {
    return this.#buf.subarray(0, this.length);
  }
}

const INT_RANGE: Partial<Record<number, [number, number]>> = {
  [GgufValueType.UINT8]: [0, 0xff],
  [GgufValueType.INT8]: [-0x80, 0x7f],
  [GgufValueType.UINT16]: [0, 0xffff],
  [GgufValueType.INT16]: [-0x8000, 0x7fff],
  [GgufValueType.UINT32]: [0, 0xffffffff],
  [GgufValueType.INT32]: [-0x80000000, 0x7fffffff],
};

const INT64_RANGE: Partial<Record<number, [bigint, bigint]>> = {
  [GgufValueType.UINT64]: [0n, (1n << 64n) - 1n],
  [GgufValueType.INT64]: [-(1n << 63n), (1n << 63n) - 1n],
};

function bad(what: string, type: number, value: unknown): GgufError {
  const shown = typeof value === "string" ? JSON.stringify(value).slice(0, 40) : String(value);
  return new GgufError(
    "gguf_bad_value",
    `${what}: ${shown} is not a valid value of GGUF type ${type}`,
  );
}

function writeScalar(out: ByteBuilder, type: number, v: unknown, what: string): void {
  const range = INT_RANGE[type];
  if (range !== undefined) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < range[0] || v > range[1]) {
      throw bad(what, type, v);
    }
  }
  switch (type) {
    case GgufValueType.UINT8:
      return out.u8(v as number);
    case GgufValueType.INT8:
      return out.i8(v as number);
    case GgufValueType.UINT16:
      return out.u16(v as number);
    case GgufValueType.INT16:
      return out.i16(v as number);
    case GgufValueType.UINT32:
      return out.u32(v as number);
    case GgufValueType.INT32:
      return out.i32(v as number);
    case GgufValueType.FLOAT32:
    case GgufValueType.FLOAT64:
      if (typeof v !== "number") throw bad(what, type, v);
      return type === GgufValueType.FLOAT32 ? out.f32(v) : out.f64(v);
    case GgufValueType.BOOL:
      if (typeof v !== "boolean") throw bad(what, type, v);
      return out.u8(v ? 1 : 0);
    case GgufValueType.STRING:
      if (typeof v !== "string") throw bad(what, type, v);
      return out.string(v);
    case GgufValueType.UINT64:
    case GgufValueType.INT64: {
      const [lo, hi] = INT64_RANGE[type]!;
      const ok = (typeof v === "number" && Number.isSafeInteger(v)) || typeof v === "bigint";
      const big = ok ? BigInt(v as number | bigint) : 0n;
      if (!ok || big < lo || big > hi) throw bad(what, type, v);
      return type === GgufValueType.UINT64 ? out.u64(big) : out.i64(big);
    }
    default:
      throw new GgufError("gguf_bad_value_type", `${what}: ${type} is not a GGUF value type`);
  }
}

/** The element type a nested array was read as (the reader keeps only the top level's). */
function inferArrayType(a: GgufArray): GgufValueTypeId {
  if (a instanceof Uint8Array) return GgufValueType.UINT8;
  if (a instanceof Int8Array) return GgufValueType.INT8;
  if (a instanceof Uint16Array) return GgufValueType.UINT16;
  if (a instanceof Int16Array) return GgufValueType.INT16;
  if (a instanceof Uint32Array) return GgufValueType.UINT32;
  if (a instanceof Int32Array) return GgufValueType.INT32;
  if (a instanceof Float32Array) return GgufValueType.FLOAT32;
  if (a instanceof Float64Array) return GgufValueType.FLOAT64;
  if (a instanceof BigUint64Array) return GgufValueType.UINT64;
  if (a instanceof BigInt64Array) return GgufValueType.INT64;
  const first = a[0];
  if (typeof first === "boolean") return GgufValueType.BOOL;
  if (Array.isArray(first) || ArrayBuffer.isView(first)) return GgufValueType.ARRAY;
  // An empty untyped array reads back as [] when written as strings.
  return GgufValueType.STRING;
}

function writeArray(out: ByteBuilder, arrayType: number, value: GgufValue, what: string): void {
  if (!Array.isArray(value) && !ArrayBuffer.isView(value)) {
    throw bad(what, GgufValueType.ARRAY, value);
  }
  if (arrayType === GgufValueType.ARRAY) {
    out.u32(GgufValueType.ARRAY);
    out.u64(BigInt(value.length));
    for (const inner of value as GgufArray[]) {
      if (!Array.isArray(inner) && !ArrayBuffer.isView(inner)) throw bad(what, arrayType, inner);
      writeArray(out, inferArrayType(inner), inner, what);
    }
    return;
  }
  out.u32(arrayType);
  out.u64(BigInt(value.length));
  const items = value as ArrayLike<unknown>;
  for (let i = 0; i < items.length; i++) writeScalar(out, arrayType, items[i], what);
}

/** Appends one metadata entry: key, type and value. */
export function encodeKv(out: ByteBuilder, key: string, kv: GgufKv): void {
  out.string(key);
  out.u32(kv.type);
  const what = `metadata '${key}'`;
  if (kv.type === GgufValueType.ARRAY) {
    if (kv.arrayType === undefined) {
      throw new GgufError("gguf_bad_value_type", `${what} is an array without an element type`);
    }
    writeArray(out, kv.arrayType, kv.value, what);
  } else {
    writeScalar(out, kv.type, kv.value, what);
  }
}
