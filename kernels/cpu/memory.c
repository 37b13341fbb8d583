/*
 * The library's buffers: nk_alloc for scratch and caches, nk_alloc_huge for what is
 * streamed every token (weights, KV caches) on transparent huge pages, nk_prefault to back
 * such a buffer with memory at load rather than page by page in the first forward passes,
 * and nk_free for both.
 */
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "nk_internal.h"

/*
 * Every allocation starts with one NK_ALIGN-sized header recording how it was made, so
 * nk_free needs no size. Large buffers (KV caches sized for a whole context) come straight
 * from mmap: the kernel zeroes their pages lazily, so memory nobody has written yet costs
 * nothing, where memset would make all of it resident at once.
 */
typedef struct {
  uint64_t total;
  uint64_t mapped;
  void *base;
} alloc_header;

#define NK_MMAP_THRESHOLD (1u << 21)
#define NK_HUGE_PAGE (1u << 21)

/* An mmapped buffer of n bytes whose first byte is `align`-aligned, header before it. */
static void *map_aligned(size_t n, size_t align) {
  const size_t total = n + NK_ALIGN + align;
  void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  uint8_t *p = (uint8_t *)nk_round_up((int64_t)((uintptr_t)m + NK_ALIGN), (int64_t)align);
  *(alloc_header *)(p - NK_ALIGN) = (alloc_header){total, 1, m};
  return p;
}

void *nk_alloc(uint64_t bytes) {
  const size_t n = bytes ? (size_t)nk_round_up((int64_t)bytes, NK_ALIGN) : NK_ALIGN;
  if (n + NK_ALIGN >= NK_MMAP_THRESHOLD) return map_aligned(n, NK_ALIGN);
  void *p = NULL;
  if (posix_memalign(&p, NK_ALIGN, n + NK_ALIGN) != 0) return NULL;
  memset(p, 0, n + NK_ALIGN);
  *(alloc_header *)p = (alloc_header){n + NK_ALIGN, 0, p};
  return (uint8_t *)p + NK_ALIGN;
}

void *nk_alloc_huge(uint64_t bytes) {
  const size_t n = (size_t)nk_round_up(bytes ? (int64_t)bytes : 1, NK_HUGE_PAGE);
  uint8_t *p = map_aligned(n, NK_HUGE_PAGE);
  /* Advice only: without transparent huge pages the buffer still works, on small pages. */
  if (p) madvise(p, n, MADV_HUGEPAGE);
  return p;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

typedef struct {
  uint8_t *p;
  uint64_t bytes;
  _Atomic int32_t failed;
} prefault_args;

/* Thread ith's share, cut at huge-page boundaries: populated by the kernel (Linux 5.14+,
 * on huge pages where the buffer was advised them), else by one write per small page that
 * leaves its byte as it was. */
static void prefault_task(void *arg, int32_t ith, int32_t nth) {
  prefault_args *a = arg;
  const uint64_t pages = (a->bytes + NK_HUGE_PAGE - 1) / NK_HUGE_PAGE;
  const uint64_t first = pages * (uint64_t)ith / (uint64_t)nth;
  const uint64_t last = pages * (uint64_t)(ith + 1) / (uint64_t)nth;
  const uint64_t from = first * NK_HUGE_PAGE;
  const uint64_t to = last * NK_HUGE_PAGE < a->bytes ? last * NK_HUGE_PAGE : a->bytes;
  if (from >= to) return;
  if (madvise(a->p + from, to - from, MADV_POPULATE_WRITE) == 0) return;
  /* Only a refusal for want of memory is final; an older kernel (EINVAL) or a passing
   * shortage (EAGAIN) falls back to touching the pages. */
  if (errno == ENOMEM) {
    a->failed = 1;
    return;
  }
  for (uint64_t at = from; at < to; at += 4096) __atomic_fetch_or(a->p + at, 0, __ATOMIC_RELAXED);
}

int32_t nk_prefault(nk_pool *pool, void *p, uint64_t bytes) {
  if (!pool || (!p && bytes > 0)) return NK_EINVAL;
  prefault_args a = {.p = p, .bytes = bytes, .failed = 0};
  nk_pool_run(pool, prefault_task, &a);
  return a.failed ? NK_ENOMEM : NK_OK;
}

void nk_free(void *ptr) {
  if (!ptr) return;
  const alloc_header h = *(alloc_header *)((uint8_t *)ptr - NK_ALIGN);
  if (h.mapped) munmap(h.base, h.total);
  else free(h.base);
}
