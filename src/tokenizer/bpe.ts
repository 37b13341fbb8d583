/**
 * Byte-pair merging of one word, as llama.cpp's llm_tokenizer_bpe_session does it: repeatedly
 * merge the adjacent pair with the lowest merge rank (leftmost on ties). Candidate pairs sit
 * in a binary heap keyed by (rank, left position); a merge invalidates its neighbours' pairs
 * lazily, so a word of n bytes costs O(n log n), never O(n^2).
 */

import type { MergeTable } from "./merges.ts";

/** Reusable scratch space; one per tokenizer, grown to the longest word seen. */
export class BpeScratch {
  ids = new Int32Array(64);
  prev = new Int32Array(64);
  next = new Int32Array(64);
  heapRank = new Int32Array(192);
  heapLeft = new Int32Array(192);
  heapRight = new Int32Array(192);
  heapLeftId = new Int32Array(192);
  heapRightId = new Int32Array(192);

  ensure(n: number): void {
    if (this.ids.length < n) {
      const size = Math.max(n, this.ids.length * 2);
      const ids = new Int32Array(size);
      ids.set(this.ids);
      this.ids = ids;
      this.prev = new Int32Array(size);
      this.next = new Int32Array(size);
    }
    const heapSize = 3 * n;
    if (this.heapRank.length < heapSize) {
      const size = Math.max(heapSize, this.heapRank.length * 2);
      this.heapRank = new Int32Array(size);
      this.heapLeft = new Int32Array(size);
      this.heapRight = new Int32Array(size);
      this.heapLeftId = new Int32Array(size);
      this.heapRightId = new Int32Array(size);
    }
  }
}

/**
 * Merges the `n` symbols in `s.ids[0..n)` and returns the resulting symbol ids in order.
 * Callers fill `s.ids` after `s.ensure(n)`.
 */
export function mergeWord(table: MergeTable, s: BpeScratch, n: number): number[] {
  const { ids, prev, next } = s;
  if (n === 1) return [ids[0]];
  const hRank = s.heapRank;
  const hLeft = s.heapLeft;
  const hRight = s.heapRight;
  const hLeftId = s.heapLeftId;
  const hRightId = s.heapRightId;
  let size = 0;

  const less = (i: number, j: number): boolean =>
    hRank[i] < hRank[j] || (hRank[i] === hRank[j] && hLeft[i] < hLeft[j]);
  const swap = (i: number, j: number): void => {
    let t = hRank[i];
    hRank[i] = hRank[j];
    hRank[j] = t;
    t = hLeft[i];
    hLeft[i] = hLeft[j];
    hLeft[j] = t;
    t = hRight[i];
    hRight[i] = hRight[j];
    hRight[j] = t;
    t = hLeftId[i];
    hLeftId[i] = hLeftId[j];
    hLeftId[j] = t;
    t = hRightId[i];
    hRightId[i] = hRightId[j];
    hRightId[j] = t;
  };
  const push = (left: number, right: number): void => {
    const rank = table.rank(ids[left], ids[right]);
    if (rank < 0) return;
    let i = size++;
    hRank[i] = rank;
    hLeft[i] = left;
    hRight[i] = right;
    hLeftId[i] = ids[left];
    hRightId[i] = ids[right];
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(i, parent)) break;
      swap(i, parent);
      i = parent;
    }
  };
  const popTop = (): void => {
    size--;
    if (size === 0) return;
    swap(0, size);
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= size) break;
      const r = l + 1;
      const child = r < size && less(r, l) ? r : l;
      if (!less(child, i)) break;
      swap(i, child);
      i = child;
    }
  };

  for (let i = 0; i < n; i++) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  for (let i = 1; i < n; i++) push(i - 1, i);

  while (size > 0) {
    const rank = hRank[0];
    const left = hLeft[0];
    const right = hRight[0];
    const stale = ids[left] !== hLeftId[0] || ids[right] !== hRightId[0];
    popTop();
    if (stale) continue;
    ids[left] = table.result(rank);
    ids[right] = -1;
    const after = next[right];
    next[left] = after;
    if (after >= 0) prev[after] = left;
    if (prev[left] >= 0) push(prev[left], left);
    if (after >= 0) push(left, after);
  }

  const out: number[] = [];
  for (let i = 0; i !== -1; i = next[i]) out.push(ids[i]);
  return out;
}
