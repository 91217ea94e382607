/* SPDX-License-Identifier: MIT
 * Runs a function as N ranks, either as forked processes or as threads of this process, and
 * collects their exit codes; stragglers are killed after a deadline so a test never hangs. */
#ifndef PCL_MP_LAUNCH_H
#define PCL_MP_LAUNCH_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Inside a rank function with `int rank, rc` and an `out:` label: on a failed check, says where
 * and leaves with rc = code. */
#define PCL_MP_CHECK(cond, code)                                                                   \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond);            \
      rc = (code);                                                                                 \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

/* Returns the rank's exit code (0 = success). */
typedef int (*pcl_mp_rank_fn)(int rank, int nranks, void *arg);

static inline double pcl_mp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Forks nranks processes running fn; returns 0 when all exited 0, else the first failing rank's
 * code (128 + signal for a killed one, 124 after the deadline). codes (may be NULL) gets each. */
static inline int pcl_mp_run(int nranks, pcl_mp_rank_fn fn, void *arg, int timeout_s, int *codes) {
  pid_t pids[1024];
  int result = 0;
  if (nranks > 1024)
    return 1;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] == 0)
      _exit(fn(r, nranks, arg));
    if (pids[r] < 0) {
      perror("fork");
      for (int k = 0; k < r; k++)
        kill(pids[k], SIGKILL);
      for (int k = 0; k < r; k++)
        waitpid(pids[k], NULL, 0);
      return 1;
    }
  }
  double end = pcl_mp_now() + timeout_s;
  int left = nranks;
  int *done = calloc((size_t)nranks, sizeof(int));
  while (left > 0) {
    int progressed = 0;
    for (int r = 0; r < nranks; r++) {
      if (done[r])
        continue;
      int st;
      pid_t p = waitpid(pids[r], &st, WNOHANG);
      if (p != pids[r])
        continue;
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      if (codes)
        codes[r] = code;
      if (code != 0 && result == 0)
        result = code;
      done[r] = 1;
      left--;
      progressed = 1;
    }
    if (left > 0 && pcl_mp_now() > end) {
      for (int r = 0; r < nranks; r++)
        if (!done[r]) {
          fprintf(stderr, "mp: rank %d still running after %d s, killing it\n", r, timeout_s);
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          if (codes)
            codes[r] = 124;
          done[r] = 1;
          left--;
        }
      if (result == 0)
        result = 124;
    }
    if (!progressed && left > 0)
      usleep(2000);
  }
  free(done);
  return result;
}

typedef struct {
  pcl_mp_rank_fn fn;
  void *arg;
  int rank, nranks, code;
} pcl_mp_thread_t;

static inline void *pcl_mp_thread_main(void *p) {
  pcl_mp_thread_t *t = p;
  t->code = t->fn(t->rank, t->nranks, t->arg);
  return NULL;
}

/* Same with threads of this process (as ncclCommInitAll uses); no deadline. */
static inline int pcl_mp_run_threads(int nranks, pcl_mp_rank_fn fn, void *arg, int *codes) {
  pthread_t th[256];
  pcl_mp_thread_t t[256];
  int result = 0;
  if (nranks > 256)
    return 1;
  for (int r = 0; r < nranks; r++) {
    t[r] = (pcl_mp_thread_t){fn, arg, r, nranks, 0};
    if (pthread_create(&th[r], NULL, pcl_mp_thread_main, &t[r]) != 0)
      return 1;
  }
  for (int r = 0; r < nranks; r++) {
    pthread_join(th[r], NULL);
    if (codes)
      codes[r] = t[r].code;
    if (t[r].code != 0 && result == 0)
      result = t[r].code;
  }
  return result;
}

#endif
