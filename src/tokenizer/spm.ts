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

/** Heap operations between two pauses of `mergeSpm` when no other budget is given. */
const DEFAULT_BUDGET = 16384;

/**
 * Merges `text` and appends its token ids to `out`. It pauses (yields) after every `budget`
 * merge steps, so a long text can be tokenized between other work; the ids do not depend on
 * where it pauses.
 */
export function* mergeSpm(
  table: SpmTable,
  text: string,
  out: number[],
  budget = DEFAULT_BUDGET,
): Generator<void> {
  const { idOf, scores } = table;
  const n = text.length; // code units; a symbol per code point, so at most this many
  const start = new Int32Array(n);
  const len = new Int32Array(n);
  const prev = new Int32Array(n);
  const next = new Int32Array(n);
  let count = 0;
  for (let i = 0; i < n; count++) {
    const c = text.charCodeAt(i);
    const width = c >= 0xd800 && c <= 0xdbff && i + 1 < n ? 2 : 1;
    start[count] = i;
    len[count] = width;
    prev[count] = count - 1;
    next[count] = count + 1;
    i += width;
  }
  if (count === 0) return;
  next[count - 1] = -1;

  const heap = new PairHeap(count);
  const tryPair = (left: number, right: number): void => {
    if (left < 0 || right < 0) return;
    const size = len[left] + len[right];
    const id = idOf.get(text.slice(start[left], start[left] + size));
    if (id !== undefined) heap.push(scores[id], left, right, size);
  };
  for (let i = 1; i < count; i++) tryPair(i - 1, i);

  let steps = 0;
  while (heap.size > 0) {
    const left = heap.topLeft();
    const right = heap.topRight();
    const size = heap.topSize();
    heap.pop();
    if (++steps % budget === 0) yield;
    if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== size) continue;
    len[left] = size;
    len[right] = 0;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    tryPair(prev[left], left);
    tryPair(left, next[left]);
  }

  for (let i = 0; i !== -1; i = next[i]) {
    const piece = text.slice(start[i], start[i] + len[i]);
    const id = idOf.get(piece);
    if (id !== undefined) {
      out.push(id);
      continue;
    }
    for (const byte of utf8.encode(piece)) out.push(table.byteIds[byte]);
  }
}

/**
 * Max-heap of candidate pairs: higher score first, then the smaller left position, as
 * llama.cpp's llm_bigram_spm comparator orders its priority queue.
 */
class PairHeap {
  size = 0;
  #score: Float64Array;
  #left: Int32Array;
  #right: Int32Array;
  #pairSize: Int32Array;

  constructor(symbols: number) {
    // Each merge pushes at most two pairs: seeds plus twice the merges.
    const capacity = Math.max(1, 3 * symbols);
    this.#score = new Float64Array(capacity);
    this.#left = new Int32Array(capacity);
    this.#right = new Int32Array(capacity);
    this.#pairSize = new Int32Array(capacity);
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

  push(score: number, left: number, right: number, size: number): void {
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(score, left, this.#score[parent], this.#left[parent])) break;
      this.#move(parent, i);
      i = parent;
    }
    this.#set(i, score, left, right, size);
  }

  pop(): void {
    const last = --this.size;
    if (last === 0) return;
    const score = this.#score[last];
    const left = this.#left[last];
    const right = this.#right[last];
    const size = this.#pairSize[last];
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
    this.#set(i, score, left, right, size);
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
  }

  #set(i: number, score: number, left: number, right: number, size: number): void {
    this.#score[i] = score;
    this.#left[i] = left;
    this.#right[i] = right;
    this.#pairSize[i] = size;
  }
}
