/*
 * The memory read bandwidth `neuron bench` holds decode against (decode efficiency = bytes
 * of weights a token reads x tokens/s / this figure), so it must be the machine's real read
 * rate or the ratio passes 100%. All pool threads read a contiguous share of a buffer on
 * huge pages, where the weights sit too (4 KiB pages cost a page walk every 4 KiB, two
 * dimensional under virtualization), in every access pattern in turn, since which one a
 * CPU streams fastest varies with the CPU and the hypervisor; the fastest pass counts.
 * read_plain is the plain loop beside the fast patterns (isa_read.c): the reference their
 * sums are tested against, and measured like them.
 */
#include <stdlib.h>

#include "nk_internal.h"

/* Every word in order. */
static uint64_t read_plain(const uint8_t *p, int64_t n) {
  const uint64_t *w = (const uint64_t *)p;
  uint64_t s = 0;
  for (int64_t i = 0; i < n / 8; i++) s += w[i];
  return s;
}

typedef struct {
  const nk_isa_ops *ops;
  const uint8_t *p;
  int64_t bytes;
  /* Shares are multiples of this many bytes; the last thread also takes what is left. */
  int64_t grain;
  int32_t pattern;
  uint64_t sums[NK_MAX_THREADS];
} read_args;

static void read_task(void *arg, int32_t ith, int32_t nth) {
  read_args *a = arg;
  const int64_t per = a->bytes / nth / a->grain * a->grain;
  const int64_t i0 = ith * per;
  const int64_t n = ith == nth - 1 ? a->bytes - i0 : per;
  a->sums[ith] = a->pattern == NK_READ_PLAIN ? read_plain(a->p + i0, n)
                                             : a->ops->read_words(a->p + i0, n, a->pattern);
}

double nk_bandwidth(nk_pool *pool, uint64_t bytes, int32_t iters) {
  if (!pool || iters <= 0 || bytes > (uint64_t)INT64_MAX) return (double)NK_EINVAL;
  const int64_t page = 4096;
  const int64_t whole = page * nk_pool_threads(pool);
  const int64_t n = (int64_t)bytes / whole * whole;
  if (n == 0) return (double)NK_EINVAL;
  uint8_t *buf = nk_alloc_huge((uint64_t)n);
  if (!buf) return (double)NK_ENOMEM;
  /* Distinct words, as weights are: every page is backed by memory of its own (not the
   * shared zero page), and no two pages are alike for a hypervisor to merge. */
  uint64_t *words = (uint64_t *)buf;
  for (int64_t i = 0; i < n / 8; i++) words[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
  read_args *a = calloc(1, sizeof(read_args));
  if (!a) {
    nk_free(buf);
    return (double)NK_ENOMEM;
  }
  *a = (read_args){.ops = nk_pool_ops(pool), .p = buf, .bytes = n, .grain = page};
  double best = 0.0;
  /* The patterns take turns, so that a busy moment on a shared host hits them alike. */
  for (int32_t i = 0; i < iters; i++) {
    for (int32_t pattern = 0; pattern < NK_READ_PATTERNS; pattern++) {
      a->pattern = pattern;
      const int64_t t0 = nk_now_ns();
      nk_pool_run(pool, read_task, a);
      const double gbs = (double)n / (double)(nk_now_ns() - t0);
      if (gbs > best) best = gbs;
    }
  }
  free(a);
  nk_free(buf);
  return best;
}

int32_t nk_read_checksum(nk_pool *pool, const void *p, int64_t bytes, int32_t pattern,
                         uint64_t *sum) {
  if (!pool || !p || !sum || bytes < 0 || bytes % 8 != 0 || (uintptr_t)p % 8 != 0 || pattern < 0 ||
      pattern >= NK_READ_PATTERNS) {
    return NK_EINVAL;
  }
  read_args *a = calloc(1, sizeof(read_args));
  if (!a) return NK_ENOMEM;
  *a =
      (read_args){.ops = nk_pool_ops(pool), .p = p, .bytes = bytes, .grain = 8, .pattern = pattern};
  nk_pool_run(pool, read_task, a);
  uint64_t s = 0;
  for (int32_t i = 0; i < nk_pool_threads(pool); i++) s += a->sums[i];
  free(a);
  *sum = s;
  return NK_OK;
}
