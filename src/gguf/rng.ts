/**
 * A small seeded PRNG (xoshiro128**, state seeded by splitmix32) so tests, fuzzers and
 * synthetic models are reproducible from one integer. Not for anything secret.
 */

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    const next = splitmix32(seed);
    this.#a = next();
    this.#b = next();
    this.#c = next();
    this.#d = next();
  }

  /** A uniform 32-bit unsigned integer. */
  u32(): number {
    const result = Math.imul(rotl(Math.imul(this.#b, 5), 7), 9) >>> 0;
    const t = this.#b << 9;
    this.#c ^= this.#a;
    this.#d ^= this.#b;
    this.#b ^= this.#c;
    this.#a ^= this.#d;
    this.#c ^= t;
    this.#d = rotl(this.#d, 11);
    return result;
  }

  /** A uniform float in [0, 1). */
  float(): number {
    return this.u32() / 4294967296;
  }

  /** A uniform float in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + (hi - lo) * this.float();
  }

  /** A uniform integer in [0, n), for n up to 2^32. */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /** A standard normal sample (Box-Muller). */
  normal(): number {
    const u = 1 - this.float();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.float());
  }

  /** Fills `out` with uniform random bytes. */
  fill(out: Uint8Array): void {
    const words = Math.floor(out.byteLength / 4);
    if ((out.byteOffset & 3) === 0 && words > 0) {
      const w = new Uint32Array(out.buffer, out.byteOffset, words);
      for (let i = 0; i < words; i++) w[i] = this.u32();
    } else {
      for (let i = 0; i + 4 <= out.byteLength; i += 4) {
        const v = this.u32();
        out[i] = v;
        out[i + 1] = v >>> 8;
        out[i + 2] = v >>> 16;
        out[i + 3] = v >>> 24;
      }
    }
    for (let i = words * 4; i < out.byteLength; i++) out[i] = this.u32();
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
