/**
 * The BPE merge table keyed by symbol ids rather than strings: `rank(a, b)` is the priority
 * of merging symbol a with symbol b (lower first, -1 when they never merge) and
 * `result(rank)` the symbol the merge makes. It lives in typed arrays (open addressing) so
 * the hot loop allocates nothing and hashes two small integers.
 *
 * A symbol is identified by its text, so strings the merges mention that are not vocabulary
 * tokens get ids past the vocabulary; llama.cpp works on the texts and would reach the same
 * strings, which then fall back to byte tokens at the end (see `fallbackIds`).
 */

import { BYTE_TO_CODEPOINT } from "./unicode.ts";

const EMPTY = -1;

function mix(a: number, b: number): number {
  let h = Math.imul(a ^ Math.imul(b, 0x85ebca77), 0x9e3779b1);
  h ^= h >>> 15;
  return Math.imul(h, 0x2c1b3c6d) ^ (h >>> 12);
}

export class MergeTable {
  /** Number of real vocabulary ids; ids from here on are merge-only strings. */
  readonly vocabSize: number;
  /** Symbol id of each byte's GPT-2 character. */
  readonly byteIds: Int32Array;
  readonly #idOf: ReadonlyMap<string, number>;
  readonly #extraIds = new Map<string, number>();
  readonly #extraTexts: string[] = [];
  readonly #mask: number;
  readonly #keyA: Int32Array;
  readonly #keyB: Int32Array;
  readonly #rank: Int32Array;
  readonly #result: Int32Array;

  constructor(idOf: ReadonlyMap<string, number>, vocabSize: number, merges: readonly string[]) {
    this.vocabSize = vocabSize;
    this.#idOf = idOf;
    let capacity = 1024;
    while (capacity < merges.length * 2) capacity *= 2;
    this.#mask = capacity - 1;
    this.#keyA = new Int32Array(capacity).fill(EMPTY);
    this.#keyB = new Int32Array(capacity);
    this.#rank = new Int32Array(capacity);
    this.#result = new Int32Array(merges.length);

    for (let i = 0; i < merges.length; i++) {
      const m = merges[i];
      // llama.cpp splits at the first space after the first character; no space: two "".
      const space = m.indexOf(" ", 1);
      const first = space < 0 ? "" : m.slice(0, space);
      const second = space < 0 ? "" : m.slice(space + 1);
      const a = this.#idFor(first);
      const b = this.#idFor(second);
      this.#result[i] = this.#idFor(first + second);
      this.#insert(a, b, i);
    }
    this.byteIds = new Int32Array(256);
    for (let byte = 0; byte < 256; byte++) {
      this.byteIds[byte] = this.#idFor(String.fromCharCode(BYTE_TO_CODEPOINT[byte]));
    }
  }

  #idFor(text: string): number {
    const id = this.#idOf.get(text) ?? this.#extraIds.get(text);
    if (id !== undefined) return id;
    const extra = this.vocabSize + this.#extraTexts.length;
    this.#extraTexts.push(text);
    this.#extraIds.set(text, extra);
    return extra;
  }

  // The first occurrence of a pair keeps its rank, as std::map::emplace does.
  #insert(a: number, b: number, rank: number): void {
    let slot = mix(a, b) & this.#mask;
    while (this.#keyA[slot] !== EMPTY) {
      if (this.#keyA[slot] === a && this.#keyB[slot] === b) return;
      slot = (slot + 1) & this.#mask;
    }
    this.#keyA[slot] = a;
    this.#keyB[slot] = b;
    this.#rank[slot] = rank;
  }

  /** Merge priority of the adjacent symbols (a, b); -1 if they do not merge. */
  rank(a: number, b: number): number {
    let slot = mix(a, b) & this.#mask;
    for (;;) {
      const ka = this.#keyA[slot];
      if (ka === EMPTY) return -1;
      if (ka === a && this.#keyB[slot] === b) return this.#rank[slot];
      slot = (slot + 1) & this.#mask;
    }
  }

  /** The symbol that merge `rank` produces. */
  result(rank: number): number {
    return this.#result[rank];
  }

  /**
   * What llama.cpp emits for a final symbol that is not a vocabulary token: the token of
   * each of its bytes that is a single-byte token on its own.
   */
  fallbackIds(id: number): number[] {
    const text = this.#extraTexts[id - this.vocabSize];
    const out: number[] = [];
    for (const byte of new TextEncoder().encode(text)) {
      if (byte >= 0x80) continue;
      const single = this.#idOf.get(String.fromCharCode(byte));
      if (single !== undefined) out.push(single);
    }
    return out;
  }
}
