/*
 * The bandwidth probe's passes (bandwidth.c) at this level's widest loads: the wrapping sum
 * of the 64-bit words of [p, p + n), read in one access pattern. The sum keeps the loads
 * from being dropped and lets a test hold every pattern to the plain loop (nk_read_plain):
 * all of them give the same value.
 */
#include <string.h>

#include "isa_common.h"

static uint64_t words(const uint8_t *p, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    s += w;
  }
  return s;
}

/* Requests the 256-byte block `ahead` bytes past p + i: the decode kernels' distance on
 * huge pages, where the probe's buffer sits. */
static inline __attribute__((always_inline)) void prefetch_block(const uint8_t *p, int64_t i) {
  for (int k = 0; k < 256; k += 64) __builtin_prefetch(p + i + NK_LINE_AHEAD_HUGE + k, 0, 3);
}

#if defined(__AVX512F__)
static inline __attribute__((always_inline)) uint64_t body(const uint8_t *p, int64_t n,
                                                           const int32_t pattern) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 256) {
    if (pattern == NK_READ_PREFETCH) prefetch_block(p, i);
    if (pattern == NK_READ_NT) {
      a0 = _mm512_add_epi64(a0, _mm512_stream_load_si512((void *)(p + i)));
      a1 = _mm512_add_epi64(a1, _mm512_stream_load_si512((void *)(p + i + 64)));
      a2 = _mm512_add_epi64(a2, _mm512_stream_load_si512((void *)(p + i + 128)));
      a3 = _mm512_add_epi64(a3, _mm512_stream_load_si512((void *)(p + i + 192)));
    } else {
      a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
      a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
      a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
      a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
    }
  }
  return (uint64_t)_mm512_reduce_add_epi64(
      _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}
#elif defined(__AVX2__)
static inline __attribute__((always_inline)) __m256i load(const uint8_t *p, const int32_t pattern) {
  return pattern == NK_READ_NT ? _mm256_stream_load_si256((const __m256i *)p)
                               : _mm256_load_si256((const __m256i *)p);
}

static inline __attribute__((always_inline)) uint64_t body(const uint8_t *p, int64_t n,
                                                           const int32_t pattern) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 256) {
    if (pattern == NK_READ_PREFETCH) prefetch_block(p, i);
    for (int k = 0; k < 256; k += 128) {
      a0 = _mm256_add_epi64(a0, load(p + i + k, pattern));
      a1 = _mm256_add_epi64(a1, load(p + i + k + 32, pattern));
      a2 = _mm256_add_epi64(a2, load(p + i + k + 64, pattern));
      a3 = _mm256_add_epi64(a3, load(p + i + k + 96, pattern));
    }
  }
  const __m256i a = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return (uint64_t)_mm_cvtsi128_si64(h) + (uint64_t)_mm_extract_epi64(h, 1);
}
#else
/* Baseline x86-64 has no non-temporal load (SSE4.1's): NT asks for each line with the
 * non-temporal prefetch hint instead. */
static inline __attribute__((always_inline)) uint64_t body(const uint8_t *p, int64_t n,
                                                           const int32_t pattern) {
  const uint64_t *w = (const uint64_t *)p;
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int64_t i = 0; i < n; i += 256) {
    if (pattern == NK_READ_PREFETCH) prefetch_block(p, i);
    if (pattern == NK_READ_NT) {
      for (int k = 0; k < 256; k += 64) __builtin_prefetch(p + i + k, 0, 0);
    }
    for (int64_t j = i / 8; j < (i + 256) / 8; j += 4) {
      a0 += w[j];
      a1 += w[j + 1];
      a2 += w[j + 2];
      a3 += w[j + 3];
    }
  }
  return a0 + a1 + a2 + a3;
}
#endif

uint64_t NK_FN(nk_read_words)(const uint8_t *p, int64_t n, int32_t pattern) {
  /* The vector loads want 64-byte alignment; the words before it and after the last whole
   * 256-byte block go through the plain loop. */
  const int64_t skew = (int64_t)((64 - (uintptr_t)p % 64) % 64);
  const int64_t head = skew < n ? skew : n;
  const int64_t blocks = (n - head) / 256 * 256;
  uint64_t s = words(p, head) + words(p + head + blocks, n - head - blocks);
  const uint8_t *b = p + head;
  switch (pattern) {
    case NK_READ_PREFETCH: return s + body(b, blocks, NK_READ_PREFETCH);
    case NK_READ_NT: return s + body(b, blocks, NK_READ_NT);
    default: return s + body(b, blocks, NK_READ_STREAM);
  }
}
