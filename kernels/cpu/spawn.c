/*
 * Worker processes for tensor parallelism. The leader's engine runs each step
 * synchronously, so it talks to its workers through plain pipe descriptors: writes and
 * reads wait with poll() and give up at a deadline instead of blocking forever, and a dead
 * worker shows up as end of file or EPIPE. Children get their own process group (a Ctrl-C
 * in a terminal reaches the leader only; it shuts them down in order) and an empty signal
 * mask; everything else, environment included, is inherited. A worker asks to be killed
 * when the thread that spawned it ends, so a leader's engine thread torn down without
 * closing its group takes the group with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nk_tp.h"

extern char **environ;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Moves fd above the standard descriptors (a process started with one of them closed hands
 * it out again), keeping close-on-exec. */
static int above_stdio(int fd) {
  if (fd > 2) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  const int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

static int make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
  fds[0] = above_stdio(fds[0]);
  fds[1] = above_stdio(fds[1]);
  if (fds[0] < 0 || fds[1] < 0) {
    const int err = -errno;
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    return err;
  }
  return 0;
}

int32_t nk_spawn(const char *const *argv, int32_t *out, const void *strings) {
  if (!argv || !argv[0] || !out || !strings) return -EINVAL;
  int in[2], from[2];
  int rc = make_pipe(in);
  if (rc) return rc;
  rc = make_pipe(from);
  if (rc) {
    close(in[0]);
    close(in[1]);
    return rc;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  /* dup2 onto 0 and 1 clears close-on-exec there; the originals close at exec. */
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from[1], 1);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  rc = posix_spawn(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(from[1]);
  if (rc != 0) {
    close(in[1]);
    close(from[0]);
    return -rc;
  }
  fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
  fcntl(from[0], F_SETFL, fcntl(from[0], F_GETFL) | O_NONBLOCK);
  out[0] = pid;
  out[1] = in[1];
  out[2] = from[0];
  return 0;
}

/* Waits for `events` on fd until deadline (ms, monotonic): 1 ready, 0 timed out, -errno. */
static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    const int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -errno;
  }
}

int32_t nk_fd_write(int32_t fd, const void *buf, int64_t n, int32_t timeout_ms) {
  const int64_t deadline = now_ms() + timeout_ms;
  const uint8_t *p = buf;
  while (n > 0) {
    const ssize_t w = write(fd, p, (size_t)n);
    if (w > 0) {
      p += w;
      n -= w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN) return -errno;
    const int ready = wait_fd(fd, POLLOUT, deadline);
    if (ready == 0) return -ETIMEDOUT;
    if (ready < 0) return ready;
  }
  return 0;
}

int64_t nk_fd_read(int32_t fd, void *buf, int64_t cap, int32_t timeout_ms) {
  if (cap <= 0) return -EINVAL;
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    const ssize_t r = read(fd, buf, (size_t)cap);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return -errno;
    const int ready = wait_fd(fd, POLLIN, deadline);
    if (ready == 0) return -ETIMEDOUT;
    if (ready < 0) return ready;
  }
}

int32_t nk_fd_close(int32_t fd) {
  return close(fd) == 0 ? 0 : -errno;
}

int32_t nk_child_wait(int32_t pid, int32_t timeout_ms, int32_t *out) {
  const int64_t deadline = now_ms() + timeout_ms;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r < 0 && errno != EINTR) return -errno;
    if (r == pid) {
      out[0] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      out[1] = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      return 1;
    }
    if (now_ms() >= deadline) return 0;
    const struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
  }
}

int32_t nk_child_kill(int32_t pid, int32_t sig) {
  return kill(pid, sig) == 0 ? 0 : -errno;
}

int32_t nk_die_with_parent(void) {
  const pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -errno;
  /* The parent may have gone before the request took effect. */
  return getppid() == parent ? 0 : -ESRCH;
}
