/*
 * Tensor parallelism on one host, the native half (src/tp/native.ts loads it):
 *
 * - comm.c: a collective (all-reduce sum, broadcast, barrier) between the processes of one
 *   tensor-parallel group through a shared memory segment, futexes and atomics.
 * - spawn.c: worker processes on pipes, and reads/writes on those pipes with deadlines, so a
 *   leader whose engine runs synchronously can drive its workers without an event loop.
 * - watchdog.c: a thread that calls an abort function when a step passes its deadline
 *   (nk_comm_abort, or NCCL's ncclCommAbort), so a rank blocked in a collective comes back.
 *
 * System failures return -errno; the collective's own failures are the NK_COMM_E* codes.
 */
#ifndef NK_TP_H
#define NK_TP_H

#include <stdint.h>

#include "nk.h"

enum {
  /* Another rank (or a watchdog) aborted the group; every later collective fails too. */
  NK_COMM_EABORTED = -1001,
  /* A rank's process is gone; nk_comm_failed_rank() says which. */
  NK_COMM_EPEER = -1002,
};

enum { NK_COMM_F32 = 0, NK_COMM_F16 = 1 };

#define NK_COMM_MAX_RANKS 64

typedef struct nk_comm nk_comm;

/* Creates the segment `name` (shm_open name, "/..."), exclusive, mode 0600, with slots of
 * `slot_bytes` per rank, and opens it as rank 0. */
NK_API nk_comm *nk_comm_create(const char *name, int32_t world, uint64_t slot_bytes,
                               int32_t *status);
/* Opens an existing segment as `rank`; fails unless it was made for `world` ranks. */
NK_API nk_comm *nk_comm_open(const char *name, int32_t world, int32_t rank, int32_t *status);
/* Announces this process and waits until every rank has joined. */
NK_API int32_t nk_comm_join(nk_comm *c);
/* Removes the segment's name (mappings stay valid). */
NK_API int32_t nk_comm_unlink(const char *name);
/* Sums `count` values of `dtype` at `buf` over every rank, in place; identical everywhere. */
NK_API int32_t nk_comm_allreduce(nk_comm *c, void *buf, int64_t count, int32_t dtype);
/* Copies `bytes` at `buf` of rank `root` into `buf` of every other rank. */
NK_API int32_t nk_comm_broadcast(nk_comm *c, void *buf, int64_t bytes, int32_t root);
NK_API int32_t nk_comm_barrier(nk_comm *c);
/* Fails every pending and later collective of the group, on every rank. Thread-safe. */
NK_API int32_t nk_comm_abort(nk_comm *c);
/* The rank whose process died (after NK_COMM_EPEER), else -1. */
NK_API int32_t nk_comm_failed_rank(nk_comm *c);
NK_API int32_t nk_comm_rank(nk_comm *c);
NK_API int32_t nk_comm_world(nk_comm *c);
NK_API void nk_comm_close(nk_comm *c);

/* Runs argv[0] (a path) with argv, stdin and stdout on new pipes, stderr inherited, in its
 * own process group. out: [pid, fd writing the child's stdin, fd reading its stdout].
 * `strings` is the memory argv points into, passed so the caller keeps it alive. */
NK_API int32_t nk_spawn(const char *const *argv, int32_t *out, const void *strings);
/* Writes all of buf before timeout_ms; returns 0, -ETIMEDOUT, -EPIPE or another -errno. */
NK_API int32_t nk_fd_write(int32_t fd, const void *buf, int64_t n, int32_t timeout_ms);
/* Reads what is there (waiting up to timeout_ms): bytes read, 0 at end of file, -ETIMEDOUT
 * or another -errno. */
NK_API int64_t nk_fd_read(int32_t fd, void *buf, int64_t cap, int32_t timeout_ms);
NK_API int32_t nk_fd_close(int32_t fd);
/* Waits up to timeout_ms for child `pid` to exit and reaps it: 1 (out: [exit code or -1,
 * signal or 0]), 0 while it runs, or -errno. */
NK_API int32_t nk_child_wait(int32_t pid, int32_t timeout_ms, int32_t *out);
NK_API int32_t nk_child_kill(int32_t pid, int32_t sig);
/* In a worker: be killed when the thread that started this process ends (the leader's
 * engine thread, even if the rest of the leader lives on). -ESRCH if it already has. */
NK_API int32_t nk_die_with_parent(void);

typedef struct nk_watchdog nk_watchdog;

/* A thread that calls `symbol(handle)` of the (already loaded) `library` when armed past its
 * deadline. NULL if the symbol cannot be found or the thread cannot start. */
NK_API nk_watchdog *nk_watchdog_create(const char *library, const char *symbol, void *handle);
NK_API void nk_watchdog_arm(nk_watchdog *w, int64_t timeout_ms);
NK_API void nk_watchdog_disarm(nk_watchdog *w);
/* How many times the watchdog has fired. */
NK_API int32_t nk_watchdog_fired(nk_watchdog *w);
NK_API void nk_watchdog_destroy(nk_watchdog *w);

#endif
