/*
 * nk_argsort_desc: libstdc++'s std::sort (introsort: median-of-three quicksort down to runs
 * of 16, heapsort past 2 log2(n) levels, then insertion sort) over indices, ordering them
 * by descending value, step for step as ggml's CPU argsort runs it. std::sort is not
 * stable, so which of two equal values comes first is whatever these exact steps give:
 * routing picks llama.cpp's expert among tied ones only by sorting the same way.
 * src/backend/reference/std_sort.ts is the same algorithm in TypeScript.
 */
#include "nk_internal.h"

#define THRESHOLD 16

/* comp(a, b) of ggml's descending argsort. */
static inline int before(const float *p, int32_t a, int32_t b) {
  return p[a] > p[b];
}

static inline void swap(int32_t *a, int64_t i, int64_t j) {
  const int32_t t = a[i];
  a[i] = a[j];
  a[j] = t;
}

static void move_median_to_first(int32_t *a, int64_t result, int64_t x, int64_t y, int64_t z,
                                 const float *p) {
  if (before(p, a[x], a[y])) {
    if (before(p, a[y], a[z])) swap(a, result, y);
    else if (before(p, a[x], a[z])) swap(a, result, z);
    else swap(a, result, x);
  } else if (before(p, a[x], a[z])) {
    swap(a, result, x);
  } else if (before(p, a[y], a[z])) {
    swap(a, result, z);
  } else {
    swap(a, result, y);
  }
}

static int64_t partition_pivot(int32_t *a, int64_t first, int64_t last, const float *p) {
  const int64_t mid = first + (last - first) / 2;
  move_median_to_first(a, first, first + 1, mid, last - 1, p);
  int64_t lo = first + 1, hi = last;
  for (;;) {
    while (before(p, a[lo], a[first])) lo++;
    hi--;
    while (before(p, a[first], a[hi])) hi--;
    if (!(lo < hi)) return lo;
    swap(a, lo, hi);
    lo++;
  }
}

/* __adjust_heap with its __push_heap. */
static void adjust_heap(int32_t *a, int64_t first, int64_t hole, int64_t len, int32_t value,
                        const float *p) {
  const int64_t top = hole;
  int64_t child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (before(p, a[first + child], a[first + child - 1])) child--;
    a[first + hole] = a[first + child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    a[first + hole] = a[first + child - 1];
    hole = child - 1;
  }
  int64_t parent = (hole - 1) / 2;
  while (hole > top && before(p, a[first + parent], value)) {
    a[first + hole] = a[first + parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  a[first + hole] = value;
}

/* __partial_sort(first, last, last): make_heap, then sort_heap. */
static void heap_sort(int32_t *a, int64_t first, int64_t last, const float *p) {
  const int64_t len = last - first;
  if (len >= 2) {
    for (int64_t parent = (len - 2) / 2;; parent--) {
      adjust_heap(a, first, parent, len, a[first + parent], p);
      if (parent == 0) break;
    }
  }
  for (int64_t end = last; end - first > 1;) {
    end--;
    const int32_t v = a[end];
    a[end] = a[first];
    adjust_heap(a, first, 0, end - first, v, p);
  }
}

static void introsort_loop(int32_t *a, int64_t first, int64_t last, int64_t depth,
                           const float *p) {
  while (last - first > THRESHOLD) {
    if (depth == 0) {
      heap_sort(a, first, last, p);
      return;
    }
    depth--;
    const int64_t cut = partition_pivot(a, first, last, p);
    introsort_loop(a, cut, last, depth, p);
    last = cut;
  }
}

/* __unguarded_linear_insert: something before `at` never comes after a[at]. */
static void linear_insert(int32_t *a, int64_t at, const float *p) {
  const int32_t v = a[at];
  int64_t i = at;
  while (before(p, v, a[i - 1])) {
    a[i] = a[i - 1];
    i--;
  }
  a[i] = v;
}

static void insertion_sort(int32_t *a, int64_t first, int64_t last, const float *p) {
  for (int64_t i = first + 1; i < last; i++) {
    if (before(p, a[i], a[first])) {
      const int32_t v = a[i];
      memmove(a + first + 1, a + first, (size_t)(i - first) * sizeof *a);
      a[first] = v;
    } else {
      linear_insert(a, i, p);
    }
  }
}

static int64_t floor_log2(int64_t n) {
  int64_t l = 0;
  while (n > 1) {
    n >>= 1;
    l++;
  }
  return l;
}

void nk_argsort_desc(int32_t *idx, int64_t n, const float *p) {
  for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)i;
  if (n < 2) return;
  introsort_loop(idx, 0, n, 2 * floor_log2(n), p);
  if (n > THRESHOLD) {
    insertion_sort(idx, 0, THRESHOLD, p);
    for (int64_t i = THRESHOLD; i < n; i++) linear_insert(idx, i, p);
  } else {
    insertion_sort(idx, 0, n, p);
  }
}
