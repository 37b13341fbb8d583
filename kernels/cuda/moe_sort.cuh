/*
 * libstdc++'s std::sort over indices by descending value, step for step: the device copy of
 * kernels/cpu/moe_sort.c (which says why routing needs exactly this order).
 */
#pragma once
#include "common.cuh"

#define MOE_SORT_THRESHOLD 16

/* comp(a, b) of ggml's descending argsort. */
__device__ __forceinline__ int moe_before(const float *p, int32_t a, int32_t b) {
  return p[a] > p[b];
}

__device__ __forceinline__ void moe_swap(int32_t *a, int i, int j) {
  const int32_t t = a[i];
  a[i] = a[j];
  a[j] = t;
}

__device__ static void moe_move_median_to_first(int32_t *a, int result, int x, int y, int z,
                                                const float *p) {
  if (moe_before(p, a[x], a[y])) {
    if (moe_before(p, a[y], a[z])) moe_swap(a, result, y);
    else if (moe_before(p, a[x], a[z])) moe_swap(a, result, z);
    else moe_swap(a, result, x);
  } else if (moe_before(p, a[x], a[z])) {
    moe_swap(a, result, x);
  } else if (moe_before(p, a[y], a[z])) {
    moe_swap(a, result, z);
  } else {
    moe_swap(a, result, y);
  }
}

__device__ static int moe_partition_pivot(int32_t *a, int first, int last, const float *p) {
  const int mid = first + (last - first) / 2;
  moe_move_median_to_first(a, first, first + 1, mid, last - 1, p);
  int lo = first + 1, hi = last;
  for (;;) {
    while (moe_before(p, a[lo], a[first])) lo++;
    hi--;
    while (moe_before(p, a[first], a[hi])) hi--;
    if (!(lo < hi)) return lo;
    moe_swap(a, lo, hi);
    lo++;
  }
}

/* __adjust_heap with its __push_heap. */
__device__ static void moe_adjust_heap(int32_t *a, int first, int hole, int len, int32_t value,
                                       const float *p) {
  const int top = hole;
  int child = hole;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (moe_before(p, a[first + child], a[first + child - 1])) child--;
    a[first + hole] = a[first + child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    a[first + hole] = a[first + child - 1];
    hole = child - 1;
  }
  int parent = (hole - 1) / 2;
  while (hole > top && moe_before(p, a[first + parent], value)) {
    a[first + hole] = a[first + parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  a[first + hole] = value;
}

/* __partial_sort(first, last, last): make_heap, then sort_heap. */
__device__ static void moe_heap_sort(int32_t *a, int first, int last, const float *p) {
  const int len = last - first;
  if (len >= 2) {
    for (int parent = (len - 2) / 2;; parent--) {
      moe_adjust_heap(a, first, parent, len, a[first + parent], p);
      if (parent == 0) break;
    }
  }
  for (int end = last; end - first > 1;) {
    end--;
    const int32_t v = a[end];
    a[end] = a[first];
    moe_adjust_heap(a, first, 0, end - first, v, p);
  }
}

__device__ static void moe_introsort_loop(int32_t *a, int first, int last, int depth,
                                          const float *p) {
  while (last - first > MOE_SORT_THRESHOLD) {
    if (depth == 0) {
      moe_heap_sort(a, first, last, p);
      return;
    }
    depth--;
    const int cut = moe_partition_pivot(a, first, last, p);
    moe_introsort_loop(a, cut, last, depth, p);
    last = cut;
  }
}

/* __unguarded_linear_insert: something before `at` never comes after a[at]. */
__device__ static void moe_linear_insert(int32_t *a, int at, const float *p) {
  const int32_t v = a[at];
  int i = at;
  while (moe_before(p, v, a[i - 1])) {
    a[i] = a[i - 1];
    i--;
  }
  a[i] = v;
}

__device__ static void moe_insertion_sort(int32_t *a, int first, int last, const float *p) {
  for (int i = first + 1; i < last; i++) {
    if (moe_before(p, a[i], a[first])) {
      const int32_t v = a[i];
      for (int j = i; j > first; j--) a[j] = a[j - 1];
      a[first] = v;
    } else {
      moe_linear_insert(a, i, p);
    }
  }
}

__device__ static int moe_floor_log2(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    l++;
  }
  return l;
}

__device__ static void moe_argsort_desc(int32_t *idx, int n, const float *p) {
  for (int i = 0; i < n; i++) idx[i] = (int32_t)i;
  if (n < 2) return;
  moe_introsort_loop(idx, 0, n, 2 * moe_floor_log2(n), p);
  if (n > MOE_SORT_THRESHOLD) {
    moe_insertion_sort(idx, 0, MOE_SORT_THRESHOLD, p);
    for (int i = MOE_SORT_THRESHOLD; i < n; i++) moe_linear_insert(idx, i, p);
  } else {
    moe_insertion_sort(idx, 0, n, p);
  }
}
