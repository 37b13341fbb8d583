/** A parsed GGUF file: its metadata, its tensor table and zero-copy access to tensor data. */

import { GgufError } from "./errors.ts";
import type { ByteSource } from "./source.ts";
import type { GgmlTypeInfo, GgufValueTypeId } from "./types.ts";

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

/** One metadata value with its GGUF type, so it can be written back as it was read. */
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

export class GgufFile {
  readonly #byName: Map<string, GgufTensorInfo>;

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

  get size(): number {
    return this.source.size;
  }

  /** Bytes of every tensor's data together: the weights. */
  get tensorBytes(): number {
    return this.tensors.reduce((sum, t) => sum + t.nBytes, 0);
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
