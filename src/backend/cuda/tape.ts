/**
 * The tape: a step's work, recorded as the model calls the ops and run at the next sync
 * point (a read, an argmax, a free). A kernel launch is a record of 32-bit words
 *
 *   [LAUNCH, kernel index, grid x, grid y, grid z, block x, n, param words...]
 *
 * whose parameter words are laid out exactly as the kernel's staging area wants them.
 * Anything else (a cuBLAS call) is a HOST record naming a closure. Two steps that launch
 * the same kernels with the same parameters have equal words, which is what lets a step be
 * captured once as a CUDA graph and replayed (graph_cache.ts): the per-step data that
 * differs (token ids, positions, block tables) lives in the step arena, not in the words.
 */

import { CudaError } from "./errors.ts";
import type { Kernel } from "./kernels.ts";

export const LAUNCH = 1;
export const HOST = 2;
export const HEADER_WORDS = 7;

const TWO_32 = 4294967296;

export class Tape {
  words = new Uint32Array(1 << 16);
  length = 0;
  readonly host: Array<() => void> = [];
  #kernel: Kernel | null = null;
  #record = 0;
  #param = 0;
  readonly #f32 = new Float32Array(1);
  readonly #u32 = new Uint32Array(this.#f32.buffer);

  get empty(): boolean {
    return this.length === 0;
  }

  /** Whether every record is a kernel launch (what a CUDA graph can hold). */
  get launchesOnly(): boolean {
    return this.host.length === 0;
  }

  #reserve(n: number): void {
    if (this.length + n <= this.words.length) return;
    const grown = new Uint32Array(Math.max(this.words.length * 2, this.length + n));
    grown.set(this.words.subarray(0, this.length));
    this.words = grown;
  }

  /** Starts a launch record; its parameters follow with p/i/f, then end(). */
  launch(k: Kernel, gx: number, gy: number, gz: number, bx: number): this {
    if (this.#kernel !== null) {
      throw new CudaError("cuda_error", `launch of ${k.name} inside ${this.#kernel.name}`);
    }
    if (!(gx >= 1 && gx < TWO_32 / 2 && gy >= 1 && gy <= 65535 && gz >= 1 && gz <= 65535)) {
      throw new CudaError(
        "cuda_invalid_argument",
        `${k.name}: grid ${gx}x${gy}x${gz} out of range`,
      );
    }
    this.#reserve(HEADER_WORDS + k.words);
    const w = this.words;
    const r = this.length;
    w[r] = LAUNCH;
    w[r + 1] = k.index;
    w[r + 2] = gx;
    w[r + 3] = gy;
    w[r + 4] = gz;
    w[r + 5] = bx;
    w[r + 6] = k.words;
    w.fill(0, r + HEADER_WORDS, r + HEADER_WORDS + k.words);
    this.#kernel = k;
    this.#record = r;
    this.#param = 0;
    return this;
  }

  #slot(kind: string): number {
    const k = this.#kernel;
    if (k === null || k.sig[this.#param] !== kind) {
      throw new CudaError(
        "cuda_error",
        `${k?.name ?? "no kernel"}: parameter ${this.#param} is not '${kind}' (${k?.sig})`,
      );
    }
    return this.#record + HEADER_WORDS + k.offsets[this.#param++];
  }

  /** A device address. */
  p(addr: number): this {
    if (!(addr > 0 && Number.isSafeInteger(addr))) {
      throw new CudaError("cuda_error", `${this.#kernel?.name}: bad device pointer ${addr}`);
    }
    const at = this.#slot("p");
    this.words[at] = addr % TWO_32;
    this.words[at + 1] = Math.floor(addr / TWO_32);
    return this;
  }

  /** An optional device address: 0 passes NULL, which the kernel reads as "none". */
  opt(addr: number): this {
    if (addr !== 0) return this.p(addr);
    const at = this.#slot("p");
    this.words[at] = 0;
    this.words[at + 1] = 0;
    return this;
  }

  i(v: number): this {
    if (!Number.isInteger(v) || v < -2147483648 || v > 2147483647) {
      throw new CudaError("cuda_invalid_argument", `${this.#kernel?.name}: int parameter ${v}`);
    }
    this.words[this.#slot("i")] = v >>> 0;
    return this;
  }

  f(v: number): this {
    this.#f32[0] = v;
    this.words[this.#slot("f")] = this.#u32[0];
    return this;
  }

  end(): void {
    const k = this.#kernel;
    if (k === null || this.#param !== k.sig.length) {
      throw new CudaError(
        "cuda_error",
        `${k?.name}: ${this.#param} of ${k?.sig.length} parameters`,
      );
    }
    this.length = this.#record + HEADER_WORDS + k.words;
    this.#kernel = null;
  }

  /** Records a host-side call (cuBLAS) to run in order with the launches. */
  hostCall(fn: () => void): void {
    this.#reserve(2);
    this.words[this.length] = HOST;
    this.words[this.length + 1] = this.host.length;
    this.host.push(fn);
    this.length += 2;
  }

  /** Drops every record from `start` on (launch records only: a fusion re-records them). */
  truncate(start: number): void {
    if (this.#kernel !== null || start < 0 || start > this.length) {
      throw new CudaError("cuda_error", `tape truncated to ${start} of ${this.length}`);
    }
    this.length = start;
  }

  clear(): void {
    this.length = 0;
    this.host.length = 0;
    this.#kernel = null;
  }
}

/** FNV-1a over the words, as a key for equal tapes. */
export function tapeHash(words: Uint32Array, length: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < length; i++) h = Math.imul(h ^ words[i], 0x01000193);
  return h >>> 0;
}

export function sameWords(a: Uint32Array, b: Uint32Array, length: number): boolean {
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return false;
  return true;
}
