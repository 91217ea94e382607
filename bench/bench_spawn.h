/* SPDX-License-Identifier: MIT
 * planccl-bench's process plumbing, CUDA-free: a barrier that a failing rank can abort (threads
 * or processes), shared memory, and the built-in launcher of the one-process-per-GPU model. */
#ifndef PCL_BENCH_SPAWN_H
#define PCL_BENCH_SPAWN_H

#include <pthread.h>
#include <stddef.h>

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, waiting, aborted;
  unsigned generation;
} bench_barrier_t;

/* `shared`: the barrier lives in bench_shm_alloc memory and is used across processes. */
int bench_barrier_init(bench_barrier_t *b, int n, int shared);
/* 0 when all n arrived, -1 once the barrier was aborted (then at once, forever). */
int bench_barrier_wait(bench_barrier_t *b);
/* Releases every waiter with -1: a rank that fails calls it so its peers stop waiting. */
void bench_barrier_abort(bench_barrier_t *b);
void bench_barrier_destroy(bench_barrier_t *b);

/* Zeroed memory that forked children share with their parent; NULL on failure. */
void *bench_shm_alloc(size_t bytes);
void bench_shm_free(void *p, size_t bytes);

/* Runs fn(rank, arg) in n forked processes (no exec: the parent must not have initialised CUDA)
 * and waits for them. When one fails (nonzero status, a signal) the others get `grace_s` seconds
 * (after `bar`, if not NULL, is aborted) and are then killed, as are all of them after
 * `timeout_s`. Returns 0 when every process returned 0, else -1, each failure named on stderr
 * under `what`. */
int bench_spawn(int n, int (*fn)(int rank, void *arg), void *arg, const char *what, int timeout_s,
                int grace_s, bench_barrier_t *bar);

#endif
