/*
 * The CPU collective of a tensor-parallel group: one shared memory segment holding a
 * header (rendezvous counter, barrier, abort state, each rank's pid) and two sets of
 * per-rank slots. A collective copies this rank's chunk into its slot of the current set,
 * meets the others at a barrier, then reads every slot in rank order, so all ranks compute
 * bit-identical sums. Sets alternate between collectives: a rank can only start writing a
 * set again after everyone passed the barrier of the collective in between, by which time
 * all reads of that set are done — one barrier per chunk, none after.
 *
 * Waiting spins briefly (a barrier partner is usually microseconds away), then sleeps on a
 * futex in short slices, checking the abort flag and, every few slices, whether the other
 * ranks' processes still exist, so a dead rank fails the group instead of hanging it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <immintrin.h>

#include "nk_internal.h"
#include "nk_tp.h"

#define COMM_MAGIC 0x6e72636du /* "mcrn" */
#define HEADER_BYTES 4096
#define SPIN_NS 50000
#define SLICE_NS 5000000
#define LIVENESS_EVERY_NS 20000000

typedef struct {
  uint32_t magic;
  int32_t world;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  _Alignas(64) _Atomic uint32_t joined;
  _Alignas(64) _Atomic uint32_t arrived;
  _Alignas(64) _Atomic uint32_t generation;
  _Alignas(64) _Atomic int32_t aborted;
  _Atomic int32_t failed_rank;
  _Atomic int32_t pids[NK_COMM_MAX_RANKS];
} comm_header;

_Static_assert(sizeof(comm_header) <= HEADER_BYTES, "comm header outgrew its page");

struct nk_comm {
  comm_header *hdr;
  uint8_t *slots;
  size_t map_bytes;
  int32_t rank;
  int32_t world;
  uint32_t seq;
  int32_t joined;
};

static void futex_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_slice(_Atomic uint32_t *word, uint32_t old) {
  struct timespec ts = {0, SLICE_NS};
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, &ts, NULL, 0);
}

static void fail_group(nk_comm *c, int32_t code, int32_t rank) {
  int32_t none = 0;
  if (atomic_compare_exchange_strong(&c->hdr->aborted, &none, code)) {
    atomic_store(&c->hdr->failed_rank, rank);
  }
  futex_wake_all(&c->hdr->generation);
  futex_wake_all(&c->hdr->joined);
}

/* A rank whose process is gone, or -1. Any rank sees a reaped process vanish; rank 0 (the
 * parent of the others) also sees its exited-but-unreaped children. */
static int32_t dead_rank(const nk_comm *c) {
  for (int32_t r = 0; r < c->world; r++) {
    if (r == c->rank) continue;
    const pid_t pid = atomic_load(&c->hdr->pids[r]);
    if (pid <= 0) continue;
    if (kill(pid, 0) == -1 && errno == ESRCH) return r;
    if (c->rank == 0) {
      siginfo_t si;
      memset(&si, 0, sizeof si);
      if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) {
        return r;
      }
    }
  }
  return -1;
}

/* Waits until *word differs from old; 0, or the group's failure. */
static int32_t wait_change(nk_comm *c, _Atomic uint32_t *word, uint32_t old) {
  const int64_t start = nk_now_ns();
  int64_t next_check = start + LIVENESS_EVERY_NS;
  while (nk_now_ns() - start < SPIN_NS) {
    if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
    _mm_pause();
  }
  for (;;) {
    if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
    const int32_t aborted = atomic_load(&c->hdr->aborted);
    if (aborted) return aborted;
    futex_wait_slice(word, old);
    if (atomic_load_explicit(word, memory_order_acquire) != old) return 0;
    const int64_t t = nk_now_ns();
    if (t >= next_check) {
      const int32_t dead = dead_rank(c);
      if (dead >= 0) {
        fail_group(c, NK_COMM_EPEER, dead);
        return atomic_load(&c->hdr->aborted);
      }
      next_check = t + LIVENESS_EVERY_NS;
    }
  }
}

static int32_t barrier(nk_comm *c) {
  comm_header *h = c->hdr;
  const int32_t aborted = atomic_load(&h->aborted);
  if (aborted) return aborted;
  const uint32_t gen = atomic_load_explicit(&h->generation, memory_order_acquire);
  if (atomic_fetch_add_explicit(&h->arrived, 1, memory_order_acq_rel) + 1 == (uint32_t)c->world) {
    atomic_store_explicit(&h->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->generation, 1, memory_order_release);
    futex_wake_all(&h->generation);
    return 0;
  }
  return wait_change(c, &h->generation, gen);
}

static nk_comm *map_segment(int fd, int32_t rank, int32_t *status) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *status = -errno;
    return NULL;
  }
  if (st.st_size < HEADER_BYTES) {
    *status = -EINVAL;
    return NULL;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    *status = -errno;
    return NULL;
  }
  nk_comm *c = calloc(1, sizeof *c);
  if (!c) {
    munmap(m, (size_t)st.st_size);
    *status = -ENOMEM;
    return NULL;
  }
  c->hdr = m;
  c->slots = (uint8_t *)m + HEADER_BYTES;
  c->map_bytes = (size_t)st.st_size;
  c->rank = rank;
  *status = 0;
  return c;
}

nk_comm *nk_comm_create(const char *name, int32_t world, uint64_t slot_bytes, int32_t *status) {
  if (world < 1 || world > NK_COMM_MAX_RANKS || slot_bytes < 64 || slot_bytes % 64 != 0 ||
      slot_bytes > (1ull << 30)) {
    *status = -EINVAL;
    return NULL;
  }
  const uint64_t total = HEADER_BYTES + 2 * (uint64_t)world * slot_bytes;
  const int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *status = -errno;
    return NULL;
  }
  if (ftruncate(fd, (off_t)total) != 0) {
    *status = -errno;
    close(fd);
    shm_unlink(name);
    return NULL;
  }
  nk_comm *c = map_segment(fd, 0, status);
  close(fd);
  if (!c) {
    shm_unlink(name);
    return NULL;
  }
  c->world = world;
  c->hdr->world = world;
  c->hdr->slot_bytes = slot_bytes;
  c->hdr->total_bytes = total;
  atomic_store(&c->hdr->failed_rank, -1);
  /* Known from the start, so ranks waiting to join notice if the creator dies first. */
  atomic_store(&c->hdr->pids[0], (int32_t)getpid());
  atomic_thread_fence(memory_order_release);
  c->hdr->magic = COMM_MAGIC;
  return c;
}

nk_comm *nk_comm_open(const char *name, int32_t world, int32_t rank, int32_t *status) {
  if (world < 1 || world > NK_COMM_MAX_RANKS || rank < 0 || rank >= world) {
    *status = -EINVAL;
    return NULL;
  }
  const int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    *status = -errno;
    return NULL;
  }
  nk_comm *c = map_segment(fd, rank, status);
  close(fd);
  if (!c) return NULL;
  atomic_thread_fence(memory_order_acquire);
  const comm_header *h = c->hdr;
  if (h->magic != COMM_MAGIC || h->world != world ||
      h->total_bytes != HEADER_BYTES + 2 * (uint64_t)world * h->slot_bytes ||
      h->total_bytes != c->map_bytes) {
    nk_comm_close(c);
    *status = -EINVAL;
    return NULL;
  }
  c->world = world;
  return c;
}

int32_t nk_comm_join(nk_comm *c) {
  if (c->joined) return -EINVAL;
  c->joined = 1;
  comm_header *h = c->hdr;
  const int32_t me = (int32_t)getpid();
  int32_t expected = c->rank == 0 ? me : 0;
  if (!atomic_compare_exchange_strong(&h->pids[c->rank], &expected, me)) {
    fail_group(c, NK_COMM_EABORTED, c->rank);
    return -EEXIST;
  }
  uint32_t n = atomic_fetch_add(&h->joined, 1) + 1;
  if (n == (uint32_t)c->world) futex_wake_all(&h->joined);
  while (n < (uint32_t)c->world) {
    const int32_t rc = wait_change(c, &h->joined, n);
    if (rc) return rc;
    n = atomic_load(&h->joined);
  }
  return 0;
}

int32_t nk_comm_unlink(const char *name) {
  return shm_unlink(name) == 0 ? 0 : -errno;
}

static uint8_t *slot(const nk_comm *c, uint32_t set, int32_t rank) {
  return c->slots + ((uint64_t)set * (uint64_t)c->world + (uint64_t)rank) * c->hdr->slot_bytes;
}

int32_t nk_comm_allreduce(nk_comm *c, void *buf, int64_t count, int32_t dtype) {
  if (count < 0 || (dtype != NK_COMM_F32 && dtype != NK_COMM_F16) || (count > 0 && !buf)) {
    return -EINVAL;
  }
  const int64_t per_chunk = (int64_t)(c->hdr->slot_bytes / sizeof(float));
  for (int64_t off = 0; off < count; off += per_chunk) {
    const int64_t n = count - off < per_chunk ? count - off : per_chunk;
    const uint32_t set = c->seq++ & 1;
    float *mine = (float *)slot(c, set, c->rank);
    if (dtype == NK_COMM_F32) {
      memcpy(mine, (const float *)buf + off, (size_t)n * sizeof(float));
    } else {
      const uint16_t *src = (const uint16_t *)buf + off;
      for (int64_t i = 0; i < n; i++) mine[i] = nk_f16_to_f32_1(src[i]);
    }
    const int32_t rc = barrier(c);
    if (rc) return rc;
    const float *first = (const float *)slot(c, set, 0);
    if (dtype == NK_COMM_F32) {
      float *out = (float *)buf + off;
      memcpy(out, first, (size_t)n * sizeof(float));
      for (int32_t r = 1; r < c->world; r++) {
        const float *s = (const float *)slot(c, set, r);
        for (int64_t i = 0; i < n; i++) out[i] += s[i];
      }
    } else {
      uint16_t *out = (uint16_t *)buf + off;
      for (int64_t i = 0; i < n; i++) {
        float sum = first[i];
        for (int32_t r = 1; r < c->world; r++) sum += ((const float *)slot(c, set, r))[i];
        out[i] = nk_f32_to_f16_1(sum);
      }
    }
  }
  return 0;
}

int32_t nk_comm_broadcast(nk_comm *c, void *buf, int64_t bytes, int32_t root) {
  if (bytes < 0 || root < 0 || root >= c->world || (bytes > 0 && !buf)) return -EINVAL;
  const int64_t per_chunk = (int64_t)c->hdr->slot_bytes;
  for (int64_t off = 0; off < bytes; off += per_chunk) {
    const int64_t n = bytes - off < per_chunk ? bytes - off : per_chunk;
    const uint32_t set = c->seq++ & 1;
    if (c->rank == root) memcpy(slot(c, set, root), (const uint8_t *)buf + off, (size_t)n);
    const int32_t rc = barrier(c);
    if (rc) return rc;
    if (c->rank != root) memcpy((uint8_t *)buf + off, slot(c, set, root), (size_t)n);
  }
  return 0;
}

int32_t nk_comm_barrier(nk_comm *c) {
  /* A barrier advances the slot sets too, so the double-buffering argument stays simple. */
  c->seq++;
  return barrier(c);
}

int32_t nk_comm_abort(nk_comm *c) {
  fail_group(c, NK_COMM_EABORTED, c->rank);
  return 0;
}

int32_t nk_comm_failed_rank(nk_comm *c) {
  return atomic_load(&c->hdr->aborted) ? atomic_load(&c->hdr->failed_rank) : -1;
}

int32_t nk_comm_rank(nk_comm *c) {
  return c->rank;
}

int32_t nk_comm_world(nk_comm *c) {
  return c->world;
}

void nk_comm_close(nk_comm *c) {
  if (!c) return;
  munmap(c->hdr, c->map_bytes);
  free(c);
}
