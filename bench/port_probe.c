/* SPDX-License-Identifier: MIT
 * planccl-portbench --probe: what one small GPU copy costs a process alone on the GPU and two
 * processes that share it and take turns, as the TCP transport's device path does (a staging
 * copy on the sender, one or two on the receiver, per message). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_spawn.h"
#include "port_probe.h"

#define PROBE_N 2000

/* What each process does in its turn: nothing (the hand-off alone); one D2H (stream sync); two;
 * one H2D from pinned memory (event sync, as the transport's receiver; or stream sync); an H2D
 * then a D2H on one stream; on two streams; on two streams from two threads (the transport's
 * receiver and proxy). */
enum {
  TURN_NONE,
  TURN_D2H,
  TURN_D2H2,
  TURN_H2D_EV,
  TURN_H2D_SYNC,
  TURN_PAIR_1S,
  TURN_PAIR_2S,
  TURN_PAIR_2T,
  PROBE_MODES
};
static const char *const probe_mode_name[PROBE_MODES] = {"hand-off alone",
                                                         "one D2H",
                                                         "two D2H",
                                                         "one H2D, event sync",
                                                         "one H2D, stream sync",
                                                         "H2D + D2H, one stream",
                                                         "H2D + D2H, two streams",
                                                         "H2D + D2H, two streams, two threads"};

typedef struct {
  _Atomic int turn;  /* whose move it is in the turn-taking phases */
  _Atomic int phase; /* rank 0 announces each phase; rank 1 follows */
  _Atomic int ready[2];
  double d2h[PROBE_N], h2d[PROBE_N];
  double turns[PROBE_MODES][PROBE_N];
} probe_shared_t;

static double probe_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Spins (yielding) until *v == want; 0, or -1 after 30 s. */
static int probe_wait(_Atomic int *v, int want) {
  double end = probe_now_us() + 30e6;
  for (unsigned i = 0; atomic_load_explicit(v, memory_order_acquire) != want; i++) {
    sched_yield();
    if ((i & 1023u) == 0 && probe_now_us() > end)
      return -1;
  }
  return 0;
}

typedef struct {
  void *dev, *host;
  cudaStream_t s, r; /* r: the second stream of the two-stream modes */
  cudaEvent_t ev;
  /* TURN_PAIR_2T: the helper thread copies H2D when go is set and clears it. */
  _Atomic int go, quit, helper_rc;
} probe_gpu_t;

static int copy_d2h(probe_gpu_t *g) {
  return cudaMemcpyAsync(g->host, g->dev, 8, cudaMemcpyDeviceToHost, g->s) == cudaSuccess &&
                 cudaStreamSynchronize(g->s) == cudaSuccess
             ? 0
             : -1;
}

/* As the transport's receiver: an asynchronous copy from pinned memory, then its event. */
static int copy_h2d_on(probe_gpu_t *g, cudaStream_t s) {
  return cudaMemcpyAsync((char *)g->dev + 64, (char *)g->host + 64, 8, cudaMemcpyHostToDevice, s) ==
                     cudaSuccess &&
                 cudaEventRecord(g->ev, s) == cudaSuccess &&
                 cudaEventSynchronize(g->ev) == cudaSuccess
             ? 0
             : -1;
}

static int copy_h2d(probe_gpu_t *g) {
  return copy_h2d_on(g, g->s);
}

static void *helper_main(void *arg) {
  probe_gpu_t *g = arg;
  if (cudaSetDevice(0) != cudaSuccess)
    atomic_store(&g->helper_rc, -1);
  while (!atomic_load_explicit(&g->quit, memory_order_acquire)) {
    if (!atomic_load_explicit(&g->go, memory_order_acquire)) {
      sched_yield();
      continue;
    }
    if (copy_h2d_on(g, g->r) != 0)
      atomic_store(&g->helper_rc, -1);
    atomic_store_explicit(&g->go, 0, memory_order_release);
  }
  return NULL;
}

static int turn_work(probe_gpu_t *g, int mode) {
  switch (mode) {
  case TURN_D2H:
    return copy_d2h(g);
  case TURN_D2H2:
    return copy_d2h(g) == 0 ? copy_d2h(g) : -1;
  case TURN_H2D_EV:
    return copy_h2d_on(g, g->s);
  case TURN_H2D_SYNC:
    return cudaMemcpyAsync(g->dev, g->host, 8, cudaMemcpyHostToDevice, g->s) == cudaSuccess &&
                   cudaStreamSynchronize(g->s) == cudaSuccess
               ? 0
               : -1;
  case TURN_PAIR_1S:
    return copy_h2d_on(g, g->s) == 0 ? copy_d2h(g) : -1;
  case TURN_PAIR_2S:
    return copy_h2d_on(g, g->r) == 0 ? copy_d2h(g) : -1;
  case TURN_PAIR_2T:
    atomic_store_explicit(&g->go, 1, memory_order_release);
    if (probe_wait(&g->go, 0) != 0 || atomic_load(&g->helper_rc) != 0)
      return -1;
    return copy_d2h(g);
  default:
    return 0;
  }
}

/* Passes the turn to the peer and waits for it back PROBE_N times, doing the mode's work in
 * each turn. Rank 0 records each round trip / 2. */
static int take_turns(probe_shared_t *sh, int rank, probe_gpu_t *g, int mode, double *out) {
  for (int i = 0; i < PROBE_N; i++) {
    double t0 = probe_now_us();
    if (probe_wait(&sh->turn, rank) != 0 || turn_work(g, mode) != 0)
      return -1;
    atomic_store_explicit(&sh->turn, 1 - rank, memory_order_release);
    if (rank == 0) {
      if (probe_wait(&sh->turn, 0) != 0)
        return -1;
      out[i] = (probe_now_us() - t0) / 2;
    }
  }
  return 0;
}

static int probe_rank(int rank, void *arg) {
  probe_shared_t *sh = arg;
  probe_gpu_t g = {0};
  if (cudaSetDevice(0) != cudaSuccess || cudaMalloc(&g.dev, 4096) != cudaSuccess ||
      cudaHostAlloc(&g.host, 4096, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaStreamCreateWithFlags(&g.r, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&g.ev, cudaEventDisableTiming) != cudaSuccess)
    return 1;
  atomic_store(&sh->ready[rank], 1);
  if (probe_wait(&sh->ready[1 - rank], 1) != 0)
    return 1;
  int rc = 0;
  if (rank == 0) {
    /* Alone: the peer's context exists but issues nothing. */
    for (int i = 0; i < PROBE_N && rc == 0; i++) {
      double t0 = probe_now_us();
      rc = copy_d2h(&g);
      sh->d2h[i] = probe_now_us() - t0;
    }
    for (int i = 0; i < PROBE_N && rc == 0; i++) {
      double t0 = probe_now_us();
      rc = copy_h2d(&g);
      sh->h2d[i] = probe_now_us() - t0;
    }
    atomic_store_explicit(&sh->phase, 1, memory_order_release);
  } else if (probe_wait(&sh->phase, 1) != 0) {
    rc = -1;
  }
  pthread_t helper;
  int helper_started = rc == 0 && pthread_create(&helper, NULL, helper_main, &g) == 0;
  if (!helper_started)
    rc = -1;
  for (int m = 0; m < PROBE_MODES && rc == 0; m++)
    rc = take_turns(sh, rank, &g, m, sh->turns[m]);
  atomic_store(&g.quit, 1);
  if (helper_started)
    pthread_join(helper, NULL);
  cudaEventDestroy(g.ev);
  cudaStreamDestroy(g.r);
  cudaStreamDestroy(g.s);
  cudaFreeHost(g.host);
  cudaFree(g.dev);
  return rc == 0 ? 0 : 1;
}

static int probe_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v) {
  qsort(v, PROBE_N, sizeof(double), probe_cmp);
  return v[PROBE_N / 2];
}

int port_probe_run(void) {
  probe_shared_t *sh = bench_shm_alloc(sizeof(*sh));
  if (sh == NULL)
    return 1;
  int rc = bench_spawn(2, probe_rank, sh, "copy probe", 300, 5, NULL) != 0;
  if (rc) {
    fprintf(stderr, "planccl-portbench --probe: a process failed\n");
  } else {
    double d2h = median(sh->d2h), h2d = median(sh->h2d), hand = median(sh->turns[TURN_NONE]);
    printf("# GPU copies of 8 bytes on device 0 (cudaMemcpyAsync on a non-blocking stream, then "
           "wait), medians of %d\n",
           PROBE_N);
    printf("#   one process issuing (the other's context idle): D2H + stream sync %.2f us, "
           "H2D from pinned + event sync %.2f us\n",
           d2h, h2d);
    printf("#   two processes taking turns (one way = round trip / 2), hand-off alone %.2f us:\n",
           hand);
    for (int m = TURN_D2H; m < PROBE_MODES; m++) {
      double t = median(sh->turns[m]);
      printf("#     %-38s %8.2f us per turn, %8.2f us over the hand-off\n", probe_mode_name[m], t,
             t - hand);
    }
  }
  bench_shm_free(sh, sizeof(*sh));
  return rc;
}
