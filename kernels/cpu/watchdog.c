/*
 * A step deadline for a thread that may be blocked in a collective: a helper thread sleeps
 * until the armed deadline and then calls the group's abort function (nk_comm_abort, or
 * NCCL's ncclCommAbort), which makes the blocked collective return with an error. The
 * function is looked up by name in a library the process has already loaded, so the
 * watchdog works for any communicator without knowing it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "nk_tp.h"

typedef int (*abort_fn)(void *);

struct nk_watchdog {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct timespec deadline;
  int armed;
  int stop;
  int32_t fired;
  void *library;
  abort_fn fn;
  void *handle;
};

static void *run(void *arg) {
  nk_watchdog *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    if (!w->armed) {
      pthread_cond_wait(&w->cv, &w->mu);
      continue;
    }
    /* The deadline is checked against the clock, not the wait's result: a re-arm may come
     * between a timeout and this thread getting the lock back. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > w->deadline.tv_sec ||
        (now.tv_sec == w->deadline.tv_sec && now.tv_nsec >= w->deadline.tv_nsec)) {
      w->armed = 0;
      w->fired++;
      pthread_mutex_unlock(&w->mu);
      w->fn(w->handle);
      pthread_mutex_lock(&w->mu);
      continue;
    }
    pthread_cond_timedwait(&w->cv, &w->mu, &w->deadline);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

nk_watchdog *nk_watchdog_create(const char *library, const char *symbol, void *handle) {
  nk_watchdog *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  w->fn = w->library ? (abort_fn)dlsym(w->library, symbol) : NULL;
  if (!w->fn) {
    if (w->library) dlclose(w->library);
    free(w);
    return NULL;
  }
  w->handle = handle;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->mu, NULL);
  if (pthread_create(&w->thread, NULL, run, w) != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    dlclose(w->library);
    free(w);
    return NULL;
  }
  return w;
}

void nk_watchdog_arm(nk_watchdog *w, int64_t timeout_ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += timeout_ms / 1000;
  t.tv_nsec += (timeout_ms % 1000) * 1000000;
  if (t.tv_nsec >= 1000000000) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&w->mu);
  w->deadline = t;
  w->armed = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void nk_watchdog_disarm(nk_watchdog *w) {
  pthread_mutex_lock(&w->mu);
  w->armed = 0;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

int32_t nk_watchdog_fired(nk_watchdog *w) {
  pthread_mutex_lock(&w->mu);
  const int32_t n = w->fired;
  pthread_mutex_unlock(&w->mu);
  return n;
}

void nk_watchdog_destroy(nk_watchdog *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  dlclose(w->library);
  free(w);
}
