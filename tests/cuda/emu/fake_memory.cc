/*
 * The fake driver's device memory: host memory with guards. New allocations are filled
 * with NaN bytes, the slack after each buffer holds a canary checked at every
 * synchronisation and free, and a PROT_NONE page follows it, so out-of-bounds writes and
 * reads of never-written memory show up in tests.
 */
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "fake_state.h"

using namespace fake;

#pragma GCC visibility push(default)
extern "C" {

/* ---- memory ---- */

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  if (CUresult r = ready()) return r;
  const double t = cfg.total_mb * 1048576.0;
  *total = (size_t)t;
  *free_bytes = (size_t)std::max(0.0, t - stats.live_bytes);
  return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t size) {
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  if (size == 0) return E_INVALID_VALUE;
  if (stats.live_bytes + (double)size > cfg.total_mb * 1048576.0) return E_OUT_OF_MEMORY;
  const size_t padded = (size + 255) / 256 * 256;
  const size_t data_pages = (padded + PAGE - 1) / PAGE;
  const size_t map_len = (data_pages + 1) * PAGE;
  void *map = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return E_OUT_OF_MEMORY;
  char *guard = (char *)map + data_pages * PAGE;
  mprotect(guard, PAGE, PROT_NONE);
  /* The buffer ends where the padding ends, right before the guard page; the padding
   * start stays 256-byte aligned like the real allocator's. */
  char *p = guard - padded;
  std::memset(p, 0xFF, size);
  std::memset(p + size, CANARY, padded - size);
  allocs[(uintptr_t)p] = Alloc{map, map_len, size, padded};
  stats.live_bytes += (double)size;
  *out = (CUdeviceptr)(uintptr_t)p;
  return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  auto it = allocs.find((uintptr_t)p);
  if (it == allocs.end()) return E_INVALID_VALUE;
  /* Like the real driver, a free waits for the device: queued work may use the buffer. */
  drain_all();
  const bool ok = canary_ok(it->first, it->second);
  stats.live_bytes -= (double)it->second.size;
  munmap(it->second.map, it->second.map_len);
  allocs.erase(it);
  if (!ok) return fail_sticky("write past the end of a buffer (found at free)", E_ILLEGAL_ADDRESS);
  return OK;
}

CUresult cuMemAllocHost_v2(void **p, size_t size) {
  if (CUresult r = ready()) return r;
  if (CUresult r = unsafe_during_capture()) return r;
  *p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  return *p ? OK : E_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p) {
  if (CUresult r = ready()) return r;
  drain_all();
  std::free(p);
  return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  if (CUresult r = copy_checks(nullptr, false)) return r;
  if (!find(dst, n) || !src) return E_INVALID_VALUE;
  /* A blocking copy goes through the legacy stream and returns when it is done. */
  issue(nullptr, [dst, src, n]() -> CUresult {
    std::memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
  });
  return drain(&legacy);
}

/* Async copies touch host memory when they run: the caller keeps it alive and unchanged
 * (source) or unread (destination) until it has waited for the stream. */
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!find(dst, n) || !src) return E_INVALID_VALUE;
  return issue(stream, [dst, src, n]() -> CUresult {
    std::memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
  });
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!find(src, n) || !dst) return E_INVALID_VALUE;
  return issue(stream, [dst, src, n]() -> CUresult {
    std::memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
  });
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!find(dst, n) || !find(src, n)) return E_INVALID_VALUE;
  return issue(stream, [dst, src, n]() -> CUresult {
    std::memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
  });
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!find(dst, n)) return E_INVALID_VALUE;
  return issue(stream, [dst, v, n]() -> CUresult {
    std::memset((void *)(uintptr_t)dst, v, n);
    return OK;
  });
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void *stream) {
  if (CUresult r = copy_checks(stream, true)) return r;
  if (!find(dst, 4 * n) || dst % 4 != 0) return E_INVALID_VALUE;
  return issue(stream, [dst, v, n]() -> CUresult {
    unsigned *p = (unsigned *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return OK;
  });
}

}  // extern "C"
#pragma GCC visibility pop
