/**
 * libstdc++'s std::sort (introsort: median-of-three quicksort down to runs of 16, heapsort
 * past 2·log2(n) levels, then insertion sort), step for step. ggml's CPU argsort is
 * std::sort over indices, and std::sort is not stable: which of two equal values comes
 * first is whatever these exact steps give, so mixture-of-experts routing reproduces
 * llama.cpp's choice among tied experts only by sorting the same way.
 * kernels/cpu/moe_sort.c is the same algorithm in C.
 */

/** Sorts `a` in place so that no element is `less` than one before it. */
export function stdSort(a: Int32Array, less: (x: number, y: number) => boolean): void {
  const n = a.length;
  if (n < 2) return;
  introsortLoop(a, 0, n, 2 * Math.floor(Math.log2(n)), less);
  finalInsertionSort(a, 0, n, less);
}

const THRESHOLD = 16;

function introsortLoop(
  a: Int32Array,
  first: number,
  last: number,
  depth: number,
  less: (x: number, y: number) => boolean,
): void {
  while (last - first > THRESHOLD) {
    if (depth === 0) {
      heapSort(a, first, last, less);
      return;
    }
    depth--;
    const cut = partitionPivot(a, first, last, less);
    introsortLoop(a, cut, last, depth, less);
    last = cut;
  }
}

function swap(a: Int32Array, i: number, j: number): void {
  const t = a[i];
  a[i] = a[j];
  a[j] = t;
}

function moveMedianToFirst(
  a: Int32Array,
  result: number,
  x: number,
  y: number,
  z: number,
  less: (x: number, y: number) => boolean,
): void {
  if (less(a[x], a[y])) {
    if (less(a[y], a[z])) swap(a, result, y);
    else if (less(a[x], a[z])) swap(a, result, z);
    else swap(a, result, x);
  } else if (less(a[x], a[z])) swap(a, result, x);
  else if (less(a[y], a[z])) swap(a, result, z);
  else swap(a, result, y);
}

function partitionPivot(
  a: Int32Array,
  first: number,
  last: number,
  less: (x: number, y: number) => boolean,
): number {
  const mid = first + ((last - first) >> 1);
  moveMedianToFirst(a, first, first + 1, mid, last - 1, less);
  // __unguarded_partition(first + 1, last, pivot = first)
  let lo = first + 1, hi = last;
  for (;;) {
    while (less(a[lo], a[first])) lo++;
    hi--;
    while (less(a[first], a[hi])) hi--;
    if (!(lo < hi)) return lo;
    swap(a, lo, hi);
    lo++;
  }
}

function finalInsertionSort(
  a: Int32Array,
  first: number,
  last: number,
  less: (x: number, y: number) => boolean,
): void {
  if (last - first > THRESHOLD) {
    insertionSort(a, first, first + THRESHOLD, less);
    for (let i = first + THRESHOLD; i < last; i++) linearInsert(a, i, less);
  } else {
    insertionSort(a, first, last, less);
  }
}

function insertionSort(
  a: Int32Array,
  first: number,
  last: number,
  less: (x: number, y: number) => boolean,
): void {
  for (let i = first + 1; i < last; i++) {
    if (less(a[i], a[first])) {
      const v = a[i];
      a.copyWithin(first + 1, first, i);
      a[first] = v;
    } else {
      linearInsert(a, i, less);
    }
  }
}

/** __unguarded_linear_insert: something before `at` is never greater than a[at]. */
function linearInsert(a: Int32Array, at: number, less: (x: number, y: number) => boolean): void {
  const v = a[at];
  let i = at;
  while (less(v, a[i - 1])) {
    a[i] = a[i - 1];
    i--;
  }
  a[i] = v;
}

/** __partial_sort(first, last, last): make_heap, then sort_heap. */
function heapSort(
  a: Int32Array,
  first: number,
  last: number,
  less: (x: number, y: number) => boolean,
): void {
  const len = last - first;
  if (len >= 2) {
    for (let parent = (len - 2) >> 1;; parent--) {
      adjustHeap(a, first, parent, len, a[first + parent], less);
      if (parent === 0) break;
    }
  }
  for (let end = last; end - first > 1;) {
    end--;
    const v = a[end];
    a[end] = a[first];
    adjustHeap(a, first, 0, end - first, v, less);
  }
}

function adjustHeap(
  a: Int32Array,
  first: number,
  hole: number,
  len: number,
  value: number,
  less: (x: number, y: number) => boolean,
): void {
  const top = hole;
  let child = hole;
  while (child < (len - 1) >> 1) {
    child = 2 * (child + 1);
    if (less(a[first + child], a[first + child - 1])) child--;
    a[first + hole] = a[first + child];
    hole = child;
  }
  if ((len & 1) === 0 && child === (len - 2) >> 1) {
    child = 2 * (child + 1);
    a[first + hole] = a[first + child - 1];
    hole = child - 1;
  }
  // __push_heap
  let parent = (hole - 1) >> 1;
  while (hole > top && less(a[first + parent], value)) {
    a[first + hole] = a[first + parent];
    hole = parent;
    parent = (hole - 1) >> 1;
  }
  a[first + hole] = value;
}
