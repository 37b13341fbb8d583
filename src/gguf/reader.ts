/**
 * GGUF v2/v3 reader. Layout (little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x (string key | u32 value_type | value)
 *   n_tensors x (string name | u32 n_dims | n_dims x i64 ne | u32 ggml_type | u64 offset)
 *   padding to `general.alignment` (default 32) | tensor data
 * Strings are u64 length + UTF-8 bytes; arrays are u32 element type + u64 count + elements.
 *
 * Every count, length, dimension and offset is checked against the bytes that remain
 * before anything is allocated, so a hostile file ends in a GgufError with the offset of
 * the bad field, never in a huge allocation, an out-of-range view or a hang.
 */

import { Cursor, narrow } from "./cursor.ts";
import { GgufError } from "./errors.ts";
import {
  GGML_MAX_DIMS,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  type GgufArray,
  GgufFile,
  type GgufKv,
  type GgufScalar,
  type GgufTensorInfo,
} from "./file.ts";
import { type ByteSource, memorySource, openSource, type SourceOptions } from "./source.ts";
import { joinSplit, splitCount } from "./split.ts";
import { ggmlTypeInfo, GGUF_SCALAR_SIZE, GgufValueType, type GgufValueTypeId } from "./types.ts";

/** Arrays nest at most this deep, so a crafted file cannot exhaust the stack. */
const MAX_ARRAY_DEPTH = 8;

/** Smallest encoding of one element of each type, to bound counts before allocating. */
function minEncodedSize(type: number): number {
  if (type === GgufValueType.STRING) return 8;
  if (type === GgufValueType.ARRAY) return 12;
  return GGUF_SCALAR_SIZE[type] ?? 1;
}

function readScalar(cur: Cursor, type: number, what: string): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8:
      return cur.u8(what);
    case GgufValueType.INT8:
      return cur.i8(what);
    case GgufValueType.UINT16:
      return cur.u16(what);
    case GgufValueType.INT16:
      return cur.i16(what);
    case GgufValueType.UINT32:
      return cur.u32(what);
    case GgufValueType.INT32:
      return cur.i32(what);
    case GgufValueType.FLOAT32:
      return cur.f32(what);
    case GgufValueType.FLOAT64:
      return cur.f64(what);
    case GgufValueType.BOOL:
      return cur.u8(what) !== 0;
    case GgufValueType.UINT64:
      return narrow(cur.u64(what));
    case GgufValueType.INT64:
      return narrow(cur.i64(what));
    case GgufValueType.STRING:
      return cur.string(what);
    default:
      throw new GgufError("gguf_bad_value_type", `${what} has unknown value type ${type}`, cur.pos);
  }
}

function readValueType(cur: Cursor, what: string): GgufValueTypeId {
  const at = cur.pos;
  const type = cur.u32(what);
  if (type > GgufValueType.FLOAT64) {
    throw new GgufError("gguf_bad_value_type", `${what} is ${type}, not a GGUF value type`, at);
  }
  return type as GgufValueTypeId;
}

function readArray(
  cur: Cursor,
  what: string,
  depth: number,
): { arrayType: GgufValueTypeId; value: GgufArray } {
  const typeAt = cur.pos;
  const arrayType = readValueType(cur, `element type of ${what}`);
  const n = cur.count(what, minEncodedSize(arrayType));
  switch (arrayType) {
    case GgufValueType.UINT8:
      return { arrayType, value: new Uint8Array(cur.copy(n, what)) };
    case GgufValueType.INT8:
      return { arrayType, value: new Int8Array(cur.copy(n, what)) };
    case GgufValueType.UINT16:
      return { arrayType, value: new Uint16Array(cur.copy(n * 2, what)) };
    case GgufValueType.INT16:
      return { arrayType, value: new Int16Array(cur.copy(n * 2, what)) };
    case GgufValueType.UINT32:
      return { arrayType, value: new Uint32Array(cur.copy(n * 4, what)) };
    case GgufValueType.INT32:
      return { arrayType, value: new Int32Array(cur.copy(n * 4, what)) };
    case GgufValueType.FLOAT32:
      return { arrayType, value: new Float32Array(cur.copy(n * 4, what)) };
    case GgufValueType.FLOAT64:
      return { arrayType, value: new Float64Array(cur.copy(n * 8, what)) };
    case GgufValueType.UINT64:
      return { arrayType, value: new BigUint64Array(cur.copy(n * 8, what)) };
    case GgufValueType.INT64:
      return { arrayType, value: new BigInt64Array(cur.copy(n * 8, what)) };
    case GgufValueType.BOOL:
      return { arrayType, value: Array.from(new Uint8Array(cur.copy(n, what)), (b) => b !== 0) };
    case GgufValueType.STRING: {
      const out = new Array<string>(n);
      for (let i = 0; i < n; i++) out[i] = cur.string(what);
      return { arrayType, value: out };
    }
    default: {
      if (depth >= MAX_ARRAY_DEPTH) {
        throw new GgufError(
          "gguf_too_large",
          `${what} nests arrays deeper than ${MAX_ARRAY_DEPTH}`,
          typeAt,
        );
      }
      const out = new Array<GgufArray>(n);
      for (let i = 0; i < n; i++) out[i] = readArray(cur, what, depth + 1).value;
      return { arrayType, value: out };
    }
  }
}

function readKv(cur: Cursor, kv: Map<string, GgufKv>): string {
  const keyAt = cur.pos;
  const key = cur.string("metadata key");
  if (kv.has(key)) {
    throw new GgufError("gguf_duplicate_key", `duplicate metadata key '${key}'`, keyAt);
  }
  const what = `'${key}'`;
  const type = readValueType(cur, `value type of ${what}`);
  if (type === GgufValueType.ARRAY) {
    const { arrayType, value } = readArray(cur, what, 0);
    kv.set(key, { type, arrayType, value });
  } else {
    kv.set(key, { type, value: readScalar(cur, type, what) });
  }
  return key;
}

type TensorHeader = Omit<GgufTensorInfo, "offset"> & { at: number; offsetAt: number };

function readTensorInfo(cur: Cursor): TensorHeader {
  const at = cur.pos;
  const name = cur.string("tensor name");
  const dimsAt = cur.pos;
  const nDims = cur.u32(`dimension count of '${name}'`);
  if (nDims > GGML_MAX_DIMS) {
    throw new GgufError(
      "gguf_bad_tensor",
      `'${name}' has ${nDims} dimensions (max ${GGML_MAX_DIMS})`,
      dimsAt,
    );
  }
  const ne: number[] = [];
  let nElements = 1;
  for (let i = 0; i < nDims; i++) {
    const dimAt = cur.pos;
    const d = cur.i64(`dimension ${i} of '${name}'`);
    if (d < 0n || d > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GgufError("gguf_bad_tensor", `'${name}' has dimension ${i} = ${d}`, dimAt);
    }
    const dim = Number(d);
    if (dim !== 0 && nElements > Number.MAX_SAFE_INTEGER / dim) {
      throw new GgufError(
        "gguf_too_large",
        `'${name}' has more elements than can be addressed`,
        dimAt,
      );
    }
    nElements *= dim;
    ne.push(dim);
  }
  const typeAt = cur.pos;
  const typeId = cur.u32(`type of '${name}'`);
  const type = ggmlTypeInfo(typeId);
  if (type === undefined) {
    throw new GgufError(
      "gguf_unknown_tensor_type",
      `'${name}' has unknown ggml type ${typeId}`,
      typeAt,
    );
  }
  const rowLength = ne[0] ?? 1;
  if (rowLength % type.blockSize !== 0) {
    throw new GgufError(
      "gguf_bad_tensor",
      `'${name}' rows of ${rowLength} values are not a whole number of ${type.name} blocks (${type.blockSize})`,
      typeAt,
    );
  }
  const nBytes = (nElements / type.blockSize) * type.typeSize;
  const offsetAt = cur.pos;
  const rel = cur.u64(`data offset of '${name}'`);
  if (rel > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new GgufError("gguf_bad_tensor", `'${name}' has data offset ${rel}`, offsetAt);
  }
  return { name, ne, type, relativeOffset: Number(rel), nBytes, nElements, at, offsetAt };
}

/** `general.alignment`: a power-of-two u32 when present, else the default. */
function alignmentOf(kv: Map<string, GgufKv>, at: number | undefined): number {
  const entry = kv.get("general.alignment");
  if (entry === undefined) return GGUF_DEFAULT_ALIGNMENT;
  const a = entry.value;
  if (entry.type !== GgufValueType.UINT32 || typeof a !== "number" || a === 0 || (a & (a - 1))) {
    throw new GgufError(
      "gguf_bad_alignment",
      `general.alignment must be a power-of-two u32, got ${String(a)}`,
      at,
    );
  }
  return a;
}

/** Places each tensor in the data section; data must be aligned, in the file, disjoint. */
function placeTensors(
  headers: TensorHeader[],
  alignment: number,
  dataOffset: number,
  size: number,
): GgufTensorInfo[] {
  const tensors = headers.map(({ at: _at, offsetAt, ...info }): GgufTensorInfo => {
    if (info.relativeOffset % alignment !== 0) {
      throw new GgufError(
        "gguf_bad_alignment",
        `tensor '${info.name}' data offset ${info.relativeOffset} is not a multiple of ${alignment}`,
        offsetAt,
      );
    }
    const offset = dataOffset + info.relativeOffset;
    if (offset + info.nBytes > size) {
      throw new GgufError(
        "gguf_truncated",
        `tensor '${info.name}' (${info.nBytes} bytes at ${offset}) extends past the end of the file (${size} bytes)`,
        offsetAt,
      );
    }
    return { ...info, offset };
  });
  // Overlapping data would let a write through one tensor's view corrupt another.
  const order = tensors.map((_, i) => i).filter((i) => tensors[i].nBytes > 0);
  order.sort((a, b) => tensors[a].offset - tensors[b].offset);
  for (let k = 1; k < order.length; k++) {
    const prev = tensors[order[k - 1]];
    const cur = tensors[order[k]];
    if (prev.offset + prev.nBytes > cur.offset) {
      throw new GgufError(
        "gguf_bad_tensor",
        `tensors '${prev.name}' and '${cur.name}' overlap`,
        headers[order[k]].offsetAt,
      );
    }
  }
  return tensors;
}

/** Parses a GGUF file from `source`. The file keeps the source; close it when done. */
export function parseGguf(source: ByteSource, path?: string): GgufFile {
  const cur = new Cursor(source);
  const magic = cur.u32("magic");
  if (magic !== GGUF_MAGIC) {
    throw new GgufError(
      "gguf_bad_magic",
      `not a GGUF file (magic 0x${magic.toString(16).padStart(8, "0")})`,
      0,
    );
  }
  const version = cur.u32("version");
  if (version !== 2 && version !== 3) {
    const hint = (version & 0xffff) === 0 ? " (a big-endian file?)" : "";
    throw new GgufError(
      "gguf_unsupported_version",
      `GGUF version ${version} is not supported${hint}`,
      4,
    );
  }
  // Each tensor info takes at least 24 bytes, each metadata entry at least 13.
  const nTensors = cur.count("tensor count", 24);
  const nKv = cur.count("metadata count", 13);

  const kv = new Map<string, GgufKv>();
  let alignmentAt: number | undefined;
  for (let i = 0; i < nKv; i++) {
    const at = cur.pos;
    if (readKv(cur, kv) === "general.alignment") alignmentAt = at;
  }
  const alignment = alignmentOf(kv, alignmentAt);

  const headers: TensorHeader[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const info = readTensorInfo(cur);
    if (seen.has(info.name)) {
      throw new GgufError("gguf_duplicate_tensor", `duplicate tensor '${info.name}'`, info.at);
    }
    seen.add(info.name);
    headers.push(info);
  }

  const dataOffset = Math.ceil(cur.pos / alignment) * alignment;
  if (nTensors > 0 && dataOffset > source.size) {
    throw new GgufError("gguf_truncated", "file ends before its tensor data", cur.pos);
  }
  const tensors = placeTensors(headers, alignment, dataOffset, source.size);
  return new GgufFile(version, kv, tensors, alignment, dataOffset, source, path);
}

/**
 * Opens and parses the GGUF file at `path` (memory-mapped unless `mmap` is false); the
 * first part of a split model opens the whole model (split.ts).
 */
export function openGguf(path: string, options: SourceOptions = {}): GgufFile {
  const file = openPart(path, options);
  if (splitCount(file) <= 1) return file;
  return joinSplit(file, path, (part) => openPart(part, options));
}

function openPart(path: string, options: SourceOptions): GgufFile {
  const source = openSource(path, options);
  try {
    return parseGguf(source, path);
  } catch (err) {
    source.close();
    throw err;
  }
}

/** Parses GGUF bytes already in memory. */
export function parseGgufBytes(bytes: Uint8Array): GgufFile {
  return parseGguf(memorySource(bytes));
}
