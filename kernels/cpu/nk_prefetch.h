/*
 * The weight prefetches of the row-by-row products: how far ahead of the bytes being
 * computed they reach (nk_pool_prefetch_distances sets an nk_mm's distances from these) and
 * the requests the kernels issue as they go. Part of nk_internal.h, which includes it once
 * nk_mm is defined.
 */
#ifndef NK_PREFETCH_H
#define NK_PREFETCH_H

/*
 * How far ahead of the bytes being computed a row-by-row pass prefetches, by where the
 * weights sit and how long the kernel computes per byte.
 * - On huge pages, one software prefetch per line, issued row by row through the compute
 *   loop (bursts of prefetches stall the loads behind them; the hardware prefetcher alone
 *   falls behind the slower kernels). One token of repacked Q8_0, the fastest pass, and the
 *   unpacked kernels stream best 2 KiB ahead (8 KiB cost Q8_0 1-6%); the repacked passes
 *   slower per byte (K-quants, several tokens) 8 KiB ahead: on the 2-core Zen 5 VM, Q4_K
 *   decode products 9-18% faster, Q6_K 18%, five tokens of Q8_0 15-25% (4 KiB: half that).
 * - On a file mapping's 4 KiB pages (weights read in place) every page costs a page walk
 *   (two-dimensional in a VM) and restarts the hardware prefetcher: lines 8 KiB and pages
 *   32 KiB ahead took decode from 38 tokens/s (lines 2 KiB ahead) to 50-52 (huge: 52-57).
 */
#define NK_LINE_AHEAD_HUGE 2048
#define NK_LINE_AHEAD_HUGE_FAR 8192
#define NK_LINE_AHEAD_SMALL 8192
#define NK_PAGE_AHEAD_SMALL 32768

/* Requests the lines of [p, p + n) + mm->line_ahead: called by a kernel for the bytes it
 * is about to read, so the requests spread evenly through its compute. Addresses past the
 * matrix are harmless (a prefetch never faults). */
static inline void nk_prefetch_lines(const nk_mm *mm, const uint8_t *p, int64_t n) {
  for (int64_t o = 0; o < n; o += 64) __builtin_prefetch(p + mm->line_ahead + o, 0, 3);
}

/* Touches the pages of [p, p + n) + mm->page_ahead (none on huge pages). */
static inline void nk_prefetch_pages(const nk_mm *mm, const uint8_t *p, int64_t n) {
  if (mm->page_ahead == 0) return;
  const uintptr_t far = (uintptr_t)p + (uintptr_t)mm->page_ahead;
  for (uintptr_t a = (far + 4095) & ~(uintptr_t)4095; a < far + (uintptr_t)n; a += 4096) {
    __builtin_prefetch((const void *)a, 0, 3);
  }
}

/* Both, for a kernel's next n bytes. */
static inline void nk_prefetch_ahead(const nk_mm *mm, const uint8_t *p, int64_t n) {
  nk_prefetch_lines(mm, p, n);
  nk_prefetch_pages(mm, p, n);
}

/* The same for a whole row, for kernels that go row by row through a chunk buffer. */
static inline void nk_prefetch_row(const nk_mm *mm, int64_t r) {
  nk_prefetch_ahead(mm, mm->w + r * mm->row_bytes, mm->row_bytes);
}

#endif
