/*
 * Persistent thread pool. Workers wait for a generation counter to change: they spin for a
 * short while (ops arrive back to back during a forward pass, and a futex wake costs more
 * than a whole small op) and then sleep on the counter with a futex, so an idle pool uses
 * no CPU. The calling thread runs share 0 of every task and spins until the others finish.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <immintrin.h>

#include "nk_internal.h"

#define SPIN_NS 200000

/* One thread's share of a split: items [front, back), packed as front << 32 | back so that
 * the owner (taking from the front) and a thief (from the back) agree by one CAS. */
typedef struct {
  _Alignas(64) _Atomic uint64_t range;
  /* The owner's items already taken from range's front, [next, end): its own line, as
   * thieves read range. */
  _Alignas(64) int64_t next, end;
} nk_share;

struct nk_pool {
  _Alignas(64) _Atomic uint32_t gen;
  _Atomic int32_t sleeping;
  _Atomic int32_t stop;
  _Alignas(64) _Atomic int32_t done;
  _Alignas(64) _Atomic int64_t next;
  _Alignas(64) nk_task_fn fn;
  void *arg;
  int32_t n;
  int32_t isa;
  int32_t page_prefetch;
  const nk_isa_ops *ops;
  pthread_t *threads;
  nk_share *shares;
  /* nk_pool_split's small_items: thieves take half of what is left, not one item. */
  int32_t steal_runs;
  void **scratch;
  int64_t scratch_bytes;
  void *shared;
  int64_t shared_bytes;
  nk_rope_cache *rope;
};

typedef struct {
  nk_pool *pool;
  int32_t ith;
} worker_arg;

/* cpuid traps to the hypervisor in a VM (microseconds): ask once. */
static uint32_t detect_features(void) {
  __builtin_cpu_init();
  uint32_t f = 0;
  if (__builtin_cpu_supports("avx2")) f |= NK_CPU_AVX2;
  if (__builtin_cpu_supports("fma")) f |= NK_CPU_FMA;
  if (__builtin_cpu_supports("avx512f")) f |= NK_CPU_AVX512F;
  if (__builtin_cpu_supports("avx512bw")) f |= NK_CPU_AVX512BW;
  if (__builtin_cpu_supports("avx512vl")) f |= NK_CPU_AVX512VL;
  if (__builtin_cpu_supports("avx512dq")) f |= NK_CPU_AVX512DQ;
  if (__builtin_cpu_supports("avx512vnni")) f |= NK_CPU_AVX512VNNI;
  if (__builtin_cpu_supports("avx512bf16")) f |= NK_CPU_AVX512BF16;
  if (__builtin_cpu_supports("avx512vbmi")) f |= NK_CPU_AVX512VBMI;
  /* gcc 12's __builtin_cpu_supports knows neither F16C, AVX-VNNI nor AMX: ask cpuid. */
  unsigned a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  if (c & (1u << 29)) f |= NK_CPU_F16C;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if (d & (1u << 25)) f |= NK_CPU_AMX_INT8;
  if (d & (1u << 22)) f |= NK_CPU_AMX_BF16;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  if (a & (1u << 4)) f |= NK_CPU_AVXVNNI;
  return f;
}

uint32_t nk_cpu_features(void) {
  static _Atomic uint32_t cached;
  uint32_t f = atomic_load_explicit(&cached, memory_order_relaxed);
  if (f == 0) {
    f = detect_features() | NK_CPU_DETECTED;
    atomic_store_explicit(&cached, f, memory_order_relaxed);
  }
  return f & ~(uint32_t)NK_CPU_DETECTED;
}

int32_t nk_best_isa(void) {
  const uint32_t f = nk_cpu_features();
  const uint32_t avx2 = NK_CPU_AVX2 | NK_CPU_FMA | NK_CPU_F16C;
  const uint32_t avx512 = avx2 | NK_CPU_AVX512F | NK_CPU_AVX512BW | NK_CPU_AVX512VL |
                          NK_CPU_AVX512DQ | NK_CPU_AVX512VNNI;
  if ((f & avx512) == avx512) {
    return f & NK_CPU_AVX512VBMI ? NK_ISA_AVX512VBMI : NK_ISA_AVX512;
  }
  if ((f & avx2) == avx2) return NK_ISA_AVX2;
  return NK_ISA_SCALAR;
}

static const nk_isa_ops *ops_for(int32_t isa) {
  switch (isa) {
    case NK_ISA_AVX512VBMI: return nk_ops_avx512vbmi();
    case NK_ISA_AVX512: return &nk_ops_avx512;
    case NK_ISA_AVX2: return &nk_ops_avx2;
    default: return &nk_ops_scalar;
  }
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static void *worker_main(void *p) {
  worker_arg wa = *(worker_arg *)p;
  free(p);
  nk_pool *pool = wa.pool;
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = atomic_load_explicit(&pool->gen, memory_order_acquire);
    if (g == seen) {
      const int64_t start = nk_now_ns();
      int spins = 0;
      while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen) {
        _mm_pause();
        if (++spins % 64 == 0 && nk_now_ns() - start > SPIN_NS) {
          atomic_fetch_add(&pool->sleeping, 1);
          futex_wait(&pool->gen, seen);
          atomic_fetch_sub(&pool->sleeping, 1);
        }
      }
    }
    seen = g;
    if (atomic_load(&pool->stop)) return NULL;
    pool->fn(pool->arg, wa.ith, pool->n);
    atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
  }
}

nk_pool *nk_pool_create(int32_t n_threads) {
  if (n_threads <= 0) n_threads = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
  if (n_threads <= 0) n_threads = 1;
  if (n_threads > NK_MAX_THREADS) n_threads = NK_MAX_THREADS;
  nk_pool *pool = nk_alloc(sizeof(nk_pool));
  if (!pool) return NULL;
  pool->n = n_threads;
  pool->isa = nk_best_isa();
  pool->ops = ops_for(pool->isa);
  pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
  pool->scratch = calloc((size_t)n_threads, sizeof(void *));
  pool->shares = nk_alloc((uint64_t)n_threads * sizeof(nk_share));
  if (!pool->threads || !pool->scratch || !pool->shares) {
    free(pool->threads);
    free(pool->scratch);
    nk_free(pool->shares);
    nk_free(pool);
    return NULL;
  }
  for (int32_t i = 1; i < n_threads; i++) {
    worker_arg *wa = malloc(sizeof(worker_arg));
    if (wa) *wa = (worker_arg){pool, i};
    if (!wa || pthread_create(&pool->threads[i], NULL, worker_main, wa) != 0) {
      free(wa);
      pool->n = i;
      nk_pool_destroy(pool);
      return NULL;
    }
    /* Named so tools (and the idle-CPU test) can tell pool workers from other threads. */
    pthread_setname_np(pool->threads[i], "nk-pool");
  }
  return pool;
}

void nk_pool_destroy(nk_pool *pool) {
  if (!pool) return;
  atomic_store(&pool->stop, 1);
  atomic_fetch_add(&pool->gen, 1);
  futex_wake_all(&pool->gen);
  for (int32_t i = 1; i < pool->n; i++) pthread_join(pool->threads[i], NULL);
  for (int32_t i = 0; i < pool->n; i++) nk_free(pool->scratch[i]);
  free(pool->scratch);
  free(pool->threads);
  nk_free(pool->shares);
  nk_free(pool->shared);
  nk_rope_cache_free(pool->rope);
  nk_free(pool);
}

int32_t nk_pool_threads(const nk_pool *pool) {
  return pool->n;
}

int32_t nk_pool_set_isa(nk_pool *pool, int32_t level) {
  if (level < NK_ISA_SCALAR || level > nk_best_isa()) return NK_EUNSUPPORTED;
  pool->isa = level;
  pool->ops = ops_for(level);
  return NK_OK;
}

int32_t nk_pool_isa(const nk_pool *pool) {
  return pool->isa;
}

void nk_pool_set_page_prefetch(nk_pool *pool, int32_t on) {
  pool->page_prefetch = on != 0;
}

/* Lines ahead on huge pages: further for the repacked passes slower per byte than one
 * token of Q8_0 (nk_internal.h). */
static int64_t huge_line_ahead(const nk_mm *mm) {
  if (!mm->tr->r16 || (mm->type == NK_Q8_0_R16 && mm->n_tokens == 1)) return NK_LINE_AHEAD_HUGE;
  return NK_LINE_AHEAD_HUGE_FAR;
}

void nk_pool_prefetch_distances(const nk_pool *pool, nk_mm *mm) {
  /* Repacked matrices are copies on huge pages (nk_repack), wherever the others are. */
  const int small = pool->page_prefetch && !mm->tr->r16;
  mm->line_ahead = small ? NK_LINE_AHEAD_SMALL : huge_line_ahead(mm);
  mm->page_ahead = small ? NK_PAGE_AHEAD_SMALL : 0;
}

const nk_isa_ops *nk_pool_ops(const nk_pool *pool) {
  return pool->ops;
}

void nk_pool_run(nk_pool *pool, nk_task_fn fn, void *arg) {
  pool->fn = fn;
  pool->arg = arg;
  atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
  atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
  if (pool->n > 1) {
    atomic_fetch_add(&pool->gen, 1);
    if (atomic_load(&pool->sleeping) > 0) futex_wake_all(&pool->gen);
  }
  fn(arg, 0, pool->n);
  while (atomic_load_explicit(&pool->done, memory_order_acquire) < pool->n - 1) _mm_pause();
}

void nk_pool_run_sized(nk_pool *pool, nk_task_fn fn, void *arg, int64_t values) {
  if (values < PARALLEL_MIN) {
    fn(arg, 0, 1);
  } else {
    nk_pool_run(pool, fn, arg);
  }
}

int64_t nk_pool_next(nk_pool *pool) {
  return atomic_fetch_add_explicit(&pool->next, 1, memory_order_relaxed);
}

void nk_pool_split(nk_pool *pool, int64_t n_items, int small_items) {
  pool->steal_runs = small_items != 0;
  for (int32_t i = 0; i < pool->n; i++) {
    const uint64_t front = (uint64_t)(n_items * i / pool->n);
    const uint64_t back = (uint64_t)(n_items * (i + 1) / pool->n);
    atomic_store_explicit(&pool->shares[i].range, front << 32 | back, memory_order_relaxed);
    pool->shares[i].next = pool->shares[i].end = 0;
  }
}

/* Takes items from share s, the first in *first: some from its front for the owner, or from
 * its back for a thief, one item or (runs) half of what is left; how many it took. */
static int64_t take(nk_share *s, int from_back, int runs, int64_t *first) {
  uint64_t v = atomic_load_explicit(&s->range, memory_order_relaxed);
  for (;;) {
    const uint64_t front = v >> 32, back = v & 0xffffffffu;
    if (front >= back) return 0;
    /* The owner takes an eighth of what is left, so its share costs a few dozen locked
     * instructions rather than one per item (each drains this core's loads). What the
     * owner holds cannot be stolen, but that is at most an eighth of what was left, and
     * near the end it takes an item at a time. */
    const uint64_t left = back - front;
    const uint64_t n = from_back ? (runs ? (left + 1) / 2 : 1) : left < 8 ? 1 : left / 8;
    const uint64_t next = from_back ? (front << 32 | (back - n)) : ((front + n) << 32 | back);
    if (atomic_compare_exchange_weak_explicit(&s->range, &v, next, memory_order_relaxed,
                                              memory_order_relaxed)) {
      *first = (int64_t)(from_back ? back - n : front);
      return (int64_t)n;
    }
  }
}

/* Items [first, first + n) become thread ith's own, the first of them returned. */
static int64_t own_run(nk_share *own, int64_t first, int64_t n) {
  own->next = first + 1;
  own->end = first + n;
  return first;
}

int64_t nk_pool_claim(nk_pool *pool, int32_t ith) {
  nk_share *own = &pool->shares[ith];
  if (own->next < own->end) return own->next++;
  int64_t first;
  const int64_t n = take(own, 0, 0, &first);
  if (n > 0) return own_run(own, first, n);
  for (;;) {
    int32_t victim = -1;
    uint64_t most = 0;
    for (int32_t i = 0; i < pool->n; i++) {
      const uint64_t v = atomic_load_explicit(&pool->shares[i].range, memory_order_relaxed);
      const uint64_t left = (v >> 32) < (v & 0xffffffffu) ? (v & 0xffffffffu) - (v >> 32) : 0;
      if (left > most) {
        most = left;
        victim = i;
      }
    }
    if (victim < 0) return -1;
    const int64_t stolen = take(&pool->shares[victim], 1, pool->steal_runs, &first);
    if (stolen > 0) return own_run(own, first, stolen);
  }
}

int32_t nk_pool_reserve(nk_pool *pool, int64_t bytes) {
  if (bytes <= pool->scratch_bytes) return NK_OK;
  for (int32_t i = 0; i < pool->n; i++) {
    void *p = nk_alloc((uint64_t)bytes);
    if (!p) return NK_ENOMEM;
    nk_free(pool->scratch[i]);
    pool->scratch[i] = p;
  }
  pool->scratch_bytes = bytes;
  return NK_OK;
}

void *nk_pool_scratch(nk_pool *pool, int32_t ith) {
  return pool->scratch[ith];
}

void *nk_pool_shared(nk_pool *pool, int64_t bytes) {
  if (bytes > pool->shared_bytes) {
    void *p = nk_alloc((uint64_t)bytes);
    if (!p) return NULL;
    nk_free(pool->shared);
    pool->shared = p;
    pool->shared_bytes = bytes;
  }
  return pool->shared;
}

nk_rope_cache *nk_pool_rope_cache(nk_pool *pool) {
  return pool->rope;
}

void nk_pool_set_rope_cache(nk_pool *pool, nk_rope_cache *cache) {
  if (pool->rope != cache) nk_rope_cache_free(pool->rope);
  pool->rope = cache;
}
