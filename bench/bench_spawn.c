/* SPDX-License-Identifier: MIT
 * The abortable barrier, shared memory and process launcher of planccl-bench (bench_spawn.h). */
#define _GNU_SOURCE
#include "bench_spawn.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int bench_barrier_init(bench_barrier_t *b, int n, int shared) {
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  int rc = -1;
  memset(b, 0, sizeof(*b));
  b->n = n;
  pthread_mutexattr_init(&ma);
  pthread_condattr_init(&ca);
  if (shared) {
    /* Robust: a rank killed while holding the lock must not wedge its peers or the parent. */
    if (pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED) != 0 ||
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST) != 0 ||
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED) != 0)
      goto out;
  }
  if (pthread_mutex_init(&b->mu, &ma) != 0)
    goto out;
  if (pthread_cond_init(&b->cv, &ca) != 0) {
    pthread_mutex_destroy(&b->mu);
    goto out;
  }
  rc = 0;
out:
  pthread_condattr_destroy(&ca);
  pthread_mutexattr_destroy(&ma);
  return rc;
}

static void lock(bench_barrier_t *b) {
  if (pthread_mutex_lock(&b->mu) == EOWNERDEAD) {
    b->aborted = 1; /* its owner died: the count is no longer trustworthy */
    pthread_mutex_consistent(&b->mu);
  }
}

int bench_barrier_wait(bench_barrier_t *b) {
  lock(b);
  unsigned gen = b->generation;
  if (!b->aborted && ++b->waiting == b->n) {
    b->waiting = 0;
    b->generation++;
    pthread_cond_broadcast(&b->cv);
  }
  while (!b->aborted && b->generation == gen)
    pthread_cond_wait(&b->cv, &b->mu);
  int rc = b->generation != gen ? 0 : -1;
  pthread_mutex_unlock(&b->mu);
  return rc;
}

void bench_barrier_abort(bench_barrier_t *b) {
  lock(b);
  b->aborted = 1;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

void bench_barrier_destroy(bench_barrier_t *b) {
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

void *bench_shm_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void bench_shm_free(void *p, size_t bytes) {
  if (p)
    munmap(p, bytes);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void name_failure(const char *what, int rank, int status) {
  if (WIFEXITED(status))
    fprintf(stderr, "planccl-bench: %s: rank %d exited with status %d\n", what, rank,
            WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    fprintf(stderr, "planccl-bench: %s: rank %d killed by signal %d\n", what, rank,
            WTERMSIG(status));
}

int bench_spawn(int n, int (*fn)(int rank, void *arg), void *arg, const char *what, int timeout_s,
                int grace_s, bench_barrier_t *bar) {
  pid_t pid[64];
  int live = 0, failed = 0;
  if (n > 64)
    return -1;
  fflush(stdout); /* or the children would print the parent's buffered output again */
  fflush(stderr);
  for (int r = 0; r < n; r++) {
    pid[r] = fork();
    if (pid[r] == 0) {
      int rc = fn(r, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(rc == 0 ? 0 : (rc & 0xff ? rc & 0xff : 1));
    }
    if (pid[r] < 0) {
      fprintf(stderr, "planccl-bench: %s: fork failed: %s\n", what, strerror(errno));
      failed = 1;
      n = r;
      if (bar)
        bench_barrier_abort(bar);
      break;
    }
    live++;
  }
  double deadline = now_s() + timeout_s, kill_at = failed ? now_s() + grace_s : 0;
  int killed = 0;
  while (live > 0) {
    for (int r = 0; r < n; r++) {
      int status;
      if (pid[r] <= 0 || waitpid(pid[r], &status, WNOHANG) != pid[r])
        continue;
      pid[r] = 0;
      live--;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        continue;
      if (!failed) { /* the first failure only: the others usually follow from it */
        name_failure(what, r, status);
        kill_at = now_s() + grace_s;
        if (bar)
          bench_barrier_abort(bar);
      }
      failed = 1;
    }
    double t = now_s();
    if (!killed && (t > deadline || (failed && t > kill_at))) {
      if (t > deadline)
        fprintf(stderr, "planccl-bench: %s: not done after %d s, killed\n", what, timeout_s);
      else
        fprintf(stderr, "planccl-bench: %s: peers of a failed rank killed after %d s\n", what,
                grace_s);
      for (int r = 0; r < n; r++)
        if (pid[r] > 0)
          kill(pid[r], SIGKILL);
      killed = failed = 1;
    }
    usleep(5000);
  }
  return failed ? -1 : 0;
}
