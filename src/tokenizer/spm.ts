/**
 * SentencePiece-style merging of one text piece, as llama.cpp's llm_tokenizer_spm_session
 * does it: the text (spaces already `▁`) starts as one symbol per code point; the adjacent
 * pair whose concatenation is the highest-scoring token merges first (leftmost on ties),
 * until no adjacent pair is a token. A final symbol that is no token falls back to its UTF-8
 * bytes' tokens.
 *
 * Candidate pairs sit in a binary heap keyed by (score, left position). A merge makes the
 * pairs around it stale; they are dropped when they surface: a pair is live while its two
 * symbols still have the lengths they had when it was pushed (symbols only grow). A text of
 * n code points costs O(n log n).
 */

const utf8 = new TextEncoder();

/** What the merge needs from a vocabulary. */
export interface SpmTable {
  readonly idOf: ReadonlyMap<string, number>;
  readonly scores: Float32Array;
  readonly byteIds: Int32Array;
}

/** Heap operations between two pauses of `merge` when no other budget is given. */
const DEFAULT_BUDGET = 16384;
const PAIR_CACHE_LIMIT = 1 << 20;
const NO_TOKEN = -1;

/**
 * Merges text pieces of one vocabulary. A symbol is known by an id: its token's, or (for a
 * single code point that is no token) the vocabulary size plus the code point; which token
 * two adjacent symbols make depends on nothing else, so it is looked up by text once and
 * then remembered by the pair of ids.
 */
export class SpmMerger {
  readonly #table: SpmTable;
  readonly #base: number;
  readonly #pairs = new Map<number, number>();
  readonly #heap = new PairHeap();
  #start = new Int32Array(0);
  #len = new Int32Array(0);
  #prev = new Int32Array(0);
  #next = new Int32Array(0);
  #sym = new Int32Array(0);

  constructor(table: SpmTable) {
    this.#table = table;
    this.#base = table.idOf.size;
  }

  /**
   * Merges `text` and appends its token ids to `out`. It pauses (yields) after every
   * `budget` merge steps, so a long text can be tokenized between other work; the ids do
   * not depend on where it pauses.
   */
  *merge(text: string, out: number[], budget = DEFAULT_BUDGET): Generator<void> {
    const { idOf, scores } = this.#table;
    const n = text.length; // code units; a symbol per code point, so at most this many
    this.#ensure(n);
    const start = this.#start;
    const len = this.#len;
    const prev = this.#prev;
    const next = this.#next;
    const sym = this.#sym;
    const base = this.#base;
    let count = 0;
    for (let i = 0; i < n; count++) {
      const cp = text.codePointAt(i)!;
      const width = cp > 0xffff ? 2 : 1;
      const id = idOf.get(width === 1 ? text[i] : text.slice(i, i + 2));
      start[count] = i;
      len[count] = width;
      prev[count] = count - 1;
      next[count] = count + 1;
      sym[count] = id ?? base + cp;
      i += width;
    }
    if (count === 0) return;
    next[count - 1] = -1;

    const heap = this.#heap;
    heap.reset(count);
    const pairs = this.#pairs;
    const stride = base + 0x110000;
    const tryPair = (left: number, right: number): void => {
      if (left < 0 || right < 0) return;
      const key = sym[left] * stride + sym[right];
      let id = pairs.get(key);
      if (id === undefined) {
        id = idOf.get(text.slice(start[left], start[right] + len[right])) ?? NO_TOKEN;
        if (pairs.size >= PAIR_CACHE_LIMIT) pairs.clear();
        pairs.set(key, id);
      }
      if (id !== NO_TOKEN) heap.push(scores[id], left, right, len[left] + len[right], id);
    };
    for (let i = 1; i < count; i++) tryPair(i - 1, i);

    let steps = 0;
    while (heap.size > 0) {
      const left = heap.topLeft();
      const right = heap.topRight();
      const size = heap.topSize();
      const merged = heap.topToken();
      heap.pop();
      if (++steps % budget === 0) yield;
      if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== size) continue;
      len[left] = size;
      len[right] = 0;
      sym[left] = merged;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      tryPair(prev[left], left);
      tryPair(left, next[left]);
    }

    for (let i = 0; i !== -1; i = next[i]) {
      if (sym[i] < base) {
        out.push(sym[i]);
        continue;
      }
      const piece = text.slice(start[i], start[i] + len[i]);
      for (const byte of utf8.encode(piece)) out.push(this.#table.byteIds[byte]);
    }
  }

  #ensure(n: number): void {
    if (this.#start.length >= n) return;
    const size = Math.max(n, 2 * this.#start.length, 256);
    this.#start = new Int32Array(size);
    this.#len = new Int32Array(size);
    this.#prev = new Int32Array(size);
    this.#next = new Int32Array(size);
    this.#sym = new Int32Array(size);
  }
}

/**
 * Max-heap of candidate pairs: higher score first, then the smaller left position, as
 * llama.cpp's llm_bigram_spm comparator orders its priority queue.
 */
class PairHeap {
  size = 0;
  #score = new Float64Array(0);
  #left = new Int32Array(0);
  #right = new Int32Array(0);
  #pairSize = new Int32Array(0);
  #token = new Int32Array(0);

  /** Empties the heap and makes room for the pairs of `symbols` symbols. */
  reset(symbols: number): void {
    this.size = 0;
    // Each merge pushes at most two pairs on top of the seeds: at most 3n pushes.
    const capacity = 3 * symbols;
    if (this.#score.length >= capacity) return;
    const size = Math.max(capacity, 2 * this.#score.length, 768);
    this.#score = new Float64Array(size);
    this.#left = new Int32Array(size);
    this.#right = new Int32Array(size);
    this.#pairSize = new Int32Array(size);
    this.#token = new Int32Array(size);
  }

  topLeft(): number {
    return this.#left[0];
  }

  topRight(): number {
    return this.#right[0];
  }

  topSize(): number {
    return this.#pairSize[0];
  }

  topToken(): number {
    return this.#token[0];
  }

  push(score: number, left: number, right: number, size: number, token: number): void {
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(score, left, this.#score[parent], this.#left[parent])) break;
      this.#move(parent, i);
      i = parent;
    }
    this.#set(i, score, left, right, size, token);
  }

  pop(): void {
    const last = --this.size;
    if (last === 0) return;
    const score = this.#score[last];
    const left = this.#left[last];
    const right = this.#right[last];
    const size = this.#pairSize[last];
    const token = this.#token[last];
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= last) break;
      const r = l + 1;
      const child = r < last &&
          this.#before(this.#score[r], this.#left[r], this.#score[l], this.#left[l])
        ? r
        : l;
      if (!this.#before(this.#score[child], this.#left[child], score, left)) break;
      this.#move(child, i);
      i = child;
    }
    this.#set(i, score, left, right, size, token);
  }

  /** Whether pair a comes out of the heap before pair b. */
  #before(scoreA: number, leftA: number, scoreB: number, leftB: number): boolean {
    return scoreA > scoreB || (scoreA === scoreB && leftA < leftB);
  }

  #move(from: number, to: number): void {
    this.#score[to] = this.#score[from];
    this.#left[to] = this.#left[from];
    this.#right[to] = this.#right[from];
    this.#pairSize[to] = this.#pairSize[from];
    this.#token[to] = this.#token[from];
  }

  #set(i: number, score: number, left: number, right: number, size: number, token: number): void {
    this.#score[i] = score;
    this.#left[i] = left;
    this.#right[i] = right;
    this.#pairSize[i] = size;
    this.#token[i] = token;
  }
}
