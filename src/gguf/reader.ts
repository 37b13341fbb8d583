/**
 * GGUF v2/v3 reader. Layout (little-endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x (string key | u32 value_type | value)
 *   n_tensors x (string name | u32 n_dims | n_dims x i64 ne | u32 ggml_type | u64 offset)
 *   padding to `general.alignment` (default 32) | tensor data
 * Strings are u64 length + UTF-8 bytes; arrays are u32 element type + u64 count + elements.
 *
 * Every count, length, dimension and offset is checked against the bytes that remain
 * before anything is allocated, so a hostile file ends in a GgufError, never in a huge
 * allocation, an out-of-range view or a hang.
 */

import { GgufError } from "./errors.ts";
import { type ByteSource, memorySource, openSource } from "./source.ts";
import { type GgmlTypeInfo, ggmlTypeInfo, GgufValueType, type GgufValueTypeId } from "./types.ts";

export type GgufArray =
  | string[]
  | boolean[]
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array
  | GgufArray[];

/** 64-bit integers are numbers when they fit in 2^53, else bigints. */
export type GgufScalar = number | bigint | boolean | string;
export type GgufValue = GgufScalar | GgufArray;

export interface GgufKv {
  type: GgufValueTypeId;
  /** Element type when `type` is ARRAY. */
  arrayType?: GgufValueTypeId;
  value: GgufValue;
}

export interface GgufTensorInfo {
  name: string;
  /** Dimensions in ggml order: ne[0] is the fastest-varying (row length). */
  ne: number[];
  type: GgmlTypeInfo;
  /** Offset of the data relative to the start of the data section. */
  relativeOffset: number;
  /** Absolute offset of the data in the file. */
  offset: number;
  nBytes: number;
  nElements: number;
}

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;
export const GGML_MAX_DIMS = 4;

const SCALAR_SIZE: Partial<Record<number, number>> = {
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

/** Smallest encoding of one element of each type, to bound counts before allocating. */
function minEncodedSize(type: number): number {
  if (type === GgufValueType.STRING) return 8;
  if (type === GgufValueType.ARRAY) return 12;
  return SCALAR_SIZE[type] ?? 1;
}

const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/** Sequential little-endian reader over a source, viewing a growing window of it. */
class Cursor {
  pos = 0;
  #window: Uint8Array;
  #dv: DataView;

  constructor(private readonly source: ByteSource) {
    this.#window = source.view(0, Math.min(source.size, 1 << 20));
    this.#dv = new DataView(this.#window.buffer, this.#window.byteOffset, this.#window.byteLength);
  }

  get remaining(): number {
    return this.source.size - this.pos;
  }

  /** Makes [pos, pos + n) addressable, or fails with the offset of the shortfall. */
  need(n: number, what: string): void {
    if (n > this.remaining) {
      throw new GgufError(
        "gguf_truncated",
        `file ends inside ${what}: need ${n} bytes, ${this.remaining} left`,
        this.pos,
      );
    }
    const end = this.pos + n;
    if (end <= this.#window.byteLength) return;
    const grown = Math.min(this.source.size, Math.max(end, this.#window.byteLength * 2));
    this.#window = this.source.view(0, grown);
    this.#dv = new DataView(this.#window.buffer, this.#window.byteOffset, this.#window.byteLength);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.#dv.getUint8(this.pos++);
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.#dv.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(what: string): bigint {
    this.need(8, what);
    const v = this.#dv.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  i64(what: string): bigint {
    this.need(8, what);
    const v = this.#dv.getBigInt64(this.pos, true);
    this.pos += 8;
    return v;
  }

  /** A u64 count that must fit `minEach` bytes per item into what remains of the file. */
  count(what: string, minEach: number): number {
    const at = this.pos;
    const n = this.u64(what);
    if (n > BigInt(Math.floor(this.remaining / Math.max(1, minEach)))) {
      throw new GgufError(
        "gguf_too_large",
        `${what} of ${n} cannot fit in the ${this.remaining} bytes that remain`,
        at,
      );
    }
    return Number(n);
  }

  string(what: string): string {
    const len = this.count(`${what} length`, 1);
    this.need(len, what);
    const s = decoder.decode(this.#window.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }

  /** Copies `n` bytes out (an aligned buffer for typed arrays). */
  copy(n: number, what: string): ArrayBuffer {
    this.need(n, what);
    const out = this.#window.slice(this.pos, this.pos + n);
    this.pos += n;
    return out.buffer;
  }

  scalar(type: number, what: string): GgufScalar {
    switch (type) {
      case GgufValueType.UINT8:
        return this.u8(what);
      case GgufValueType.INT8:
        this.need(1, what);
        return this.#dv.getInt8(this.pos++);
      case GgufValueType.UINT16:
        this.need(2, what);
        this.pos += 2;
        return this.#dv.getUint16(this.pos - 2, true);
      case GgufValueType.INT16:
        this.need(2, what);
        this.pos += 2;
        return this.#dv.getInt16(this.pos - 2, true);
      case GgufValueType.UINT32:
        return this.u32(what);
      case GgufValueType.INT32:
        this.need(4, what);
        this.pos += 4;
        return this.#dv.getInt32(this.pos - 4, true);
      case GgufValueType.FLOAT32:
        this.need(4, what);
        this.pos += 4;
        return this.#dv.getFloat32(this.pos - 4, true);
      case GgufValueType.FLOAT64:
        this.need(8, what);
        this.pos += 8;
        return this.#dv.getFloat64(this.pos - 8, true);
      case GgufValueType.BOOL:
        return this.u8(what) !== 0;
      case GgufValueType.UINT64:
        return narrow(this.u64(what));
      case GgufValueType.INT64:
        return narrow(this.i64(what));
      case GgufValueType.STRING:
        return this.string(what);
      default:
        throw new GgufError(
          "gguf_bad_value_type",
          `${what} has unknown value type ${type}`,
          this.pos,
        );
    }
  }
}

function narrow(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(v)
    : v;
}

function readArray(
  cur: Cursor,
  what: string,
  depth: number,
): { arrayType: GgufValueTypeId; value: GgufArray } {
  const typeAt = cur.pos;
  const type = cur.u32(`${what} element type`);
  if (type > GgufValueType.FLOAT64) {
    throw new GgufError("gguf_bad_value_type", `${what} has unknown element type ${type}`, typeAt);
  }
  const n = cur.count(`${what} element count`, minEncodedSize(type));
  const arrayType = type as GgufValueTypeId;
  switch (type) {
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
    case GgufValueType.BOOL: {
      const bytes = new Uint8Array(cur.copy(n, what));
      return { arrayType, value: Array.from(bytes, (b) => b !== 0) };
    }
    case GgufValueType.STRING: {
      const out = new Array<string>(n);
      for (let i = 0; i < n; i++) out[i] = cur.string(what);
      return { arrayType, value: out };
    }
    default: {
      // Nested arrays: bounded depth so a crafted file cannot exhaust the stack.
      if (depth >= 8) {
        throw new GgufError("gguf_too_large", `${what} nests arrays deeper than 8`, typeAt);
      }
      const out = new Array<GgufArray>(n);
      for (let i = 0; i < n; i++) out[i] = readArray(cur, what, depth + 1).value;
      return { arrayType, value: out };
    }
  }
}

function readKv(cur: Cursor, kv: Map<string, GgufKv>): void {
  const keyAt = cur.pos;
  const key = cur.string("metadata key");
  if (kv.has(key)) {
    throw new GgufError("gguf_duplicate_key", `duplicate metadata key '${key}'`, keyAt);
  }
  const typeAt = cur.pos;
  const type = cur.u32(`type of '${key}'`);
  if (type > GgufValueType.FLOAT64) {
    throw new GgufError("gguf_bad_value_type", `'${key}' has unknown value type ${type}`, typeAt);
  }
  if (type === GgufValueType.ARRAY) {
    const { arrayType, value } = readArray(cur, `'${key}'`, 0);
    kv.set(key, { type: GgufValueType.ARRAY, arrayType, value });
  } else {
    kv.set(key, { type: type as GgufValueTypeId, value: cur.scalar(type, `'${key}'`) });
  }
}

function readTensorInfo(cur: Cursor): Omit<GgufTensorInfo, "offset"> {
  const at = cur.pos;
  const name = cur.string("tensor name");
  const nDims = cur.u32(`dimension count of '${name}'`);
  if (nDims > GGML_MAX_DIMS) {
    throw new GgufError(
      "gguf_bad_tensor",
      `'${name}' has ${nDims} dimensions (max ${GGML_MAX_DIMS})`,
      at,
    );
  }
  const ne: number[] = [];
  let nElements = 1;
  for (let i = 0; i < nDims; i++) {
    const d = cur.i64(`dimension ${i} of '${name}'`);
    if (d < 0n || d > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GgufError("gguf_bad_tensor", `'${name}' has dimension ${i} = ${d}`, at);
    }
    const dim = Number(d);
    if (dim !== 0 && nElements > Number.MAX_SAFE_INTEGER / dim) {
      throw new GgufError(
        "gguf_too_large",
        `'${name}' has more elements than can be addressed`,
        at,
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
      at,
    );
  }
  const nBytes = (nElements / type.blockSize) * type.typeSize;
  const offAt = cur.pos;
  const rel = cur.u64(`data offset of '${name}'`);
  if (rel > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new GgufError("gguf_bad_tensor", `'${name}' has data offset ${rel}`, offAt);
  }
  return { name, ne, type, relativeOffset: Number(rel), nBytes, nElements };
}

/** A parsed GGUF file: metadata, tensor table and zero-copy access to tensor data. */
export class GgufFile {
  constructor(
    readonly version: number,
    readonly kv: Map<string, GgufKv>,
    readonly tensors: GgufTensorInfo[],
    readonly alignment: number,
    readonly dataOffset: number,
    readonly source: ByteSource,
    readonly path: string | undefined,
  ) {
    this.#byName = new Map(tensors.map((t) => [t.name, t]));
  }

  readonly #byName: Map<string, GgufTensorInfo>;

  get size(): number {
    return this.source.size;
  }

  /** The metadata value of `key`, or undefined. */
  get(key: string): GgufValue | undefined {
    return this.kv.get(key)?.value;
  }

  tensor(name: string): GgufTensorInfo | undefined {
    return this.#byName.get(name);
  }

  /** The tensor named `name`, or a GgufError naming it. */
  requireTensor(name: string): GgufTensorInfo {
    const t = this.#byName.get(name);
    if (t === undefined) {
      throw new GgufError(
        "gguf_missing_tensor",
        `missing tensor '${name}' in ${this.path ?? "GGUF"}`,
      );
    }
    return t;
  }

  /** The tensor's bytes, viewed in place. */
  data(t: GgufTensorInfo): Uint8Array {
    return this.source.view(t.offset, t.nBytes);
  }

  /** Native address of the tensor's bytes. */
  pointer(t: GgufTensorInfo): Deno.PointerObject {
    return this.source.pointer(t.offset);
  }

  close(): void {
    this.source.close();
  }
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
  const nTensors = cur.count("tensor count", 24);
  const nKv = cur.count("metadata count", 13);

  const kv = new Map<string, GgufKv>();
  for (let i = 0; i < nKv; i++) readKv(cur, kv);

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const alignKv = kv.get("general.alignment");
  if (alignKv !== undefined) {
    const a = alignKv.value;
    if (
      alignKv.type !== GgufValueType.UINT32 || typeof a !== "number" || a === 0 ||
      (a & (a - 1)) !== 0
    ) {
      throw new GgufError(
        "gguf_bad_alignment",
        `general.alignment must be a power-of-two u32, got ${String(a)}`,
      );
    }
    alignment = a;
  }

  const infos: Omit<GgufTensorInfo, "offset">[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const at = cur.pos;
    const info = readTensorInfo(cur);
    if (seen.has(info.name)) {
      throw new GgufError("gguf_duplicate_tensor", `duplicate tensor '${info.name}'`, at);
    }
    seen.add(info.name);
    infos.push(info);
  }

  const dataOffset = Math.ceil(cur.pos / alignment) * alignment;
  if (nTensors > 0 && dataOffset > source.size) {
    throw new GgufError("gguf_truncated", "file ends before its tensor data", cur.pos);
  }
  const tensors = infos.map((info): GgufTensorInfo => {
    if (info.relativeOffset % alignment !== 0) {
      throw new GgufError(
        "gguf_bad_alignment",
        `tensor '${info.name}' data offset ${info.relativeOffset} is not a multiple of ${alignment}`,
      );
    }
    const offset = dataOffset + info.relativeOffset;
    if (offset + info.nBytes > source.size) {
      throw new GgufError(
        "gguf_truncated",
        `tensor '${info.name}' (${info.nBytes} bytes at ${offset}) extends past the end of the file (${source.size} bytes)`,
        offset,
      );
    }
    return { ...info, offset };
  });
  return new GgufFile(version, kv, tensors, alignment, dataOffset, source, path);
}

/** Opens and parses the GGUF file at `path` (memory-mapped unless `mmap` is false). */
export function openGguf(path: string, options: { mmap?: boolean } = {}): GgufFile {
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
