/**
 * Sequential little-endian reads over a ByteSource, for the GGUF header. Every read is
 * bounds-checked against the source, every count is checked against the bytes that
 * remain before anything is allocated, and every failure is a GgufError carrying the
 * byte offset where the problem starts.
 */

import { GgufError } from "./errors.ts";
import type { ByteSource } from "./source.ts";

const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/** 64-bit integers become numbers when they fit in 2^53, else stay bigints. */
export function narrow(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(v)
    : v;
}

/** Reads forward through a source, viewing a window of it that grows as needed. */
export class Cursor {
  pos = 0;
  #window: Uint8Array;
  #dv: DataView;

  constructor(private readonly source: ByteSource) {
    this.#window = source.view(0, Math.min(source.size, 1 << 20));
    this.#dv = new DataView(this.#window.buffer, this.#window.byteOffset, this.#window.byteLength);
  }

  get size(): number {
    return this.source.size;
  }

  get remaining(): number {
    return this.source.size - this.pos;
  }

  /** Makes [pos, pos + n) addressable, or fails with the offset of the shortfall. */
  need(n: number, what: string): void {
    const end = this.pos + n;
    if (end <= this.#window.byteLength) return;
    if (n > this.remaining) {
      throw new GgufError(
        "gguf_truncated",
        `file ends inside ${what}: need ${n} bytes, ${this.remaining} left`,
        this.pos,
      );
    }
    const grown = Math.min(this.source.size, Math.max(end, this.#window.byteLength * 2));
    this.#window = this.source.view(0, grown);
    this.#dv = new DataView(this.#window.buffer, this.#window.byteOffset, this.#window.byteLength);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.#dv.getUint8(this.pos++);
  }
  i8(what: string): number {
    this.need(1, what);
    return this.#dv.getInt8(this.pos++);
  }
  u16(what: string): number {
    this.need(2, what);
    this.pos += 2;
    return this.#dv.getUint16(this.pos - 2, true);
  }
  i16(what: string): number {
    this.need(2, what);
    this.pos += 2;
    return this.#dv.getInt16(this.pos - 2, true);
  }
  u32(what: string): number {
    this.need(4, what);
    this.pos += 4;
    return this.#dv.getUint32(this.pos - 4, true);
  }
  i32(what: string): number {
    this.need(4, what);
    this.pos += 4;
    return this.#dv.getInt32(this.pos - 4, true);
  }
  f32(what: string): number {
    this.need(4, what);
    this.pos += 4;
    return this.#dv.getFloat32(this.pos - 4, true);
  }
  f64(what: string): number {
    this.need(8, what);
    this.pos += 8;
    return this.#dv.getFloat64(this.pos - 8, true);
  }
  u64(what: string): bigint {
    this.need(8, what);
    this.pos += 8;
    return this.#dv.getBigUint64(this.pos - 8, true);
  }
  i64(what: string): bigint {
    this.need(8, what);
    this.pos += 8;
    return this.#dv.getBigInt64(this.pos - 8, true);
  }

  /**
   * A u64 count of items of at least `minEach` bytes each, which must fit in what remains
   * of the file after it. Read as two u32 halves: no bigint on this hot path.
   */
  count(what: string, minEach: number): number {
    return this.#bounded(what, minEach, "count");
  }

  /** A u64-length-prefixed UTF-8 string; `what` names it in errors. */
  string(what: string): string {
    const len = this.#bounded(what, 1, "length");
    this.need(len, what);
    const s = decoder.decode(this.#window.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }

  #bounded(what: string, minEach: number, noun: string): number {
    if (this.pos + 8 > this.#window.byteLength) this.need(8, `${noun} of ${what}`);
    const at = this.pos;
    const lo = this.#dv.getUint32(at, true);
    const hi = this.#dv.getUint32(at + 4, true);
    this.pos += 8;
    const n = hi * 4294967296 + lo;
    if (n * minEach > this.remaining) {
      const exact = (BigInt(hi) << 32n) | BigInt(lo);
      throw new GgufError(
        "gguf_too_large",
        `${noun} ${exact} of ${what} cannot fit in the ${this.remaining} bytes that remain`,
        at,
      );
    }
    return n;
  }

  /** Copies `n` bytes out into a fresh (so aligned) buffer, for typed arrays. */
  copy(n: number, what: string): ArrayBuffer {
    this.need(n, what);
    const out = this.#window.slice(this.pos, this.pos + n);
    this.pos += n;
    return out.buffer;
  }
}
