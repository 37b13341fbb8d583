/**
 * Runs the same ops on a backend under test and on the reference backend (the oracle), or
 * another backend, and compares. Host data reaches an activation the only way the Backend interface allows:
 * as an F32 weight whose rows are gathered with `embed`.
 */

import type { Activation, Backend, Weight, WeightSource } from "../../../src/backend/backend.ts";
import { ReferenceBackend } from "../../../src/backend/reference/reference_backend.ts";
import { GgmlType, type GgmlTypeInfo, ggmlTypeInfo } from "../../../src/gguf/types.ts";
import { Rng } from "../../../src/gguf/rng.ts";
import { randomBlocks } from "../../../src/gguf/quant/random.ts";
import { AssertionError } from "../../support/assert.ts";

export interface Both<T> {
  dev: T;
  ref: T;
}

export function randomF32(rng: Rng, n: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.normal() * scale;
  return out;
}

/** max |got - want| / rms(want): an error on the scale of a typical output value. */
export function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let maxDiff = 0;
  let sumSq = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    maxDiff = Number.isNaN(d) ? Infinity : Math.max(maxDiff, d);
    sumSq += want[i] * want[i];
  }
  return maxDiff / (Math.sqrt(sumSq / want.length) || 1);
}

export function assertClose(
  what: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  bound: number,
): number {
  if (got.length !== want.length) {
    throw new AssertionError(`${what}: ${got.length} values, ${want.length} expected`);
  }
  const err = relError(got, want);
  if (!(err <= bound)) {
    throw new AssertionError(`${what}: relative error ${err.toExponential(3)} > ${bound}`);
  }
  return err;
}

export function typeNamed(name: string): GgmlTypeInfo {
  const id = (GgmlType as Record<string, number>)[name];
  return ggmlTypeInfo(id)!;
}

/** A weight source over `bytes` (kept alive by the caller while it is loaded). */
export function source(
  name: string,
  type: GgmlTypeInfo,
  rows: number,
  cols: number,
  bytes: Uint8Array,
): WeightSource {
  return { name, type, rows, cols, bytes, pointer: Deno.UnsafePointer.of(bytes)! };
}

export class Pair {
  readonly rng: Rng;
  /** Host buffers of loaded weights: a backend may read them until it copies. */
  readonly #keep: Uint8Array[] = [];

  /** `ref` is the backend `dev` is compared with: the reference unless another is given. */
  constructor(readonly dev: Backend, seed = 1, readonly ref: Backend = new ReferenceBackend()) {
    this.rng = new Rng(seed);
  }

  weight(src: WeightSource): Both<Weight> {
    this.#keep.push(src.bytes);
    return { dev: this.dev.loadWeight(src), ref: this.ref.loadWeight(src) };
  }

  /** A random weight of `type`, values of RMS about `rms`. */
  randomWeight(type: GgmlTypeInfo, rows: number, cols: number, rms = 1): Both<Weight> {
    const bytes = randomBlocks(type, (rows * cols) / type.blockSize, this.rng, rms);
    return this.weight(source(`w_${type.name}_${rows}x${cols}`, type, rows, cols, bytes));
  }

  /** An activation holding `data` (rows x cols). */
  upload(data: Float32Array, rows: number, cols: number): Both<Activation> {
    return this.uploadEach(data, data, rows, cols);
  }

  /** Activations holding `devData` on the device and `refData` on the reference. */
  uploadEach(
    devData: Float32Array,
    refData: Float32Array,
    rows: number,
    cols: number,
  ): Both<Activation> {
    const f32 = ggmlTypeInfo(GgmlType.F32)!;
    // Kept alive: a backend that reads weights in place (the CPU's) reads them when its
    // queued embed runs, after this returns.
    const bytes = (d: Float32Array): Uint8Array => {
      const b = new Uint8Array(d.slice().buffer);
      this.#keep.push(b);
      return b;
    };
    const wDev = this.dev.loadWeight(source("upload", f32, rows, cols, bytes(devData)));
    const wRef = this.ref.loadWeight(source("upload", f32, rows, cols, bytes(refData)));
    const ids = Int32Array.from({ length: rows }, (_, i) => i);
    const a = this.activation(rows, cols);
    this.dev.embed(a.dev, wDev, ids);
    this.ref.embed(a.ref, wRef, ids);
    return a;
  }

  random(rows: number, cols: number, scale = 1): Both<Activation> {
    return this.upload(randomF32(this.rng, rows * cols, scale), rows, cols);
  }

  activation(rows: number, cols: number): Both<Activation> {
    return { dev: this.dev.activation(rows, cols), ref: this.ref.activation(rows, cols) };
  }

  read(a: Both<Activation>): Both<Float32Array> {
    return { dev: this.dev.read(a.dev), ref: this.ref.read(a.ref) };
  }

  /** Reads both and checks they agree within `bound`; returns the error. */
  check(what: string, a: Both<Activation>, bound: number): number {
    const { dev, ref } = this.read(a);
    return assertClose(what, dev, ref, bound);
  }
}
