/* SPDX-License-Identifier: MIT
 * What bench_run.c (communicators, buffers, process models) and bench_measure.c (the checked and
 * timed calls of one size) share: the ranks one thread drives and the error helpers. */
#ifndef PCL_BENCH_RUN_INT_H
#define PCL_BENCH_RUN_INT_H

#include "bench_run.h"

typedef struct {
  int rank; /* global rank */
  int dev;  /* its device: the rank, or rank mod the devices with --share-gpu */
  ncclComm_t comm;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  char *send, *recv; /* device, `bytes` each */
  ncclWindow_t wsend, wrecv;
} rank_t;

/* Shared by the ranks of a run: the unique id rank 0 makes, and the barrier. */
typedef struct {
  ncclUniqueId id;
  bench_barrier_t bar;
} shared_t;

typedef struct {
  bench_job_t *job;
  const bench_opts_t *o;
  bench_lib_t *lib;
  shared_t *sh;
  int nlocal; /* ranks this thread drives: 1, or all of them in the single-thread model */
  rank_t rk[BENCH_MAX_GPUS];
  size_t bytes;     /* of each device buffer: the largest input or output of the sweep */
  char *img, *back; /* host staging, `bytes` each */
} drv_t;

/* 0, or -1 after naming the failed call and aborting the barrier (the peers stop waiting). */
int bench_cu_check(drv_t *d, cudaError_t e, const char *what);
int bench_nc_check(drv_t *d, ncclResult_t r, const char *what);

#define CU(call) bench_cu_check(d, (call), #call)
#define NC(call) bench_nc_check(d, (call), #call)
#define EACH(i) for (int i = 0; i < d->nlocal; i++)

int bench_drv_barrier(drv_t *d);
/* A group around the local ranks' calls when one thread drives several. */
int bench_drv_group_start(drv_t *d);
int bench_drv_group_end(drv_t *d);
/* One call on every local rank. */
int bench_drv_issue(drv_t *d, const bench_case_t *k, int place);
/* Size s of collective o->colls[ci], placement `place`: checked and timed, eager and graph. */
int bench_drv_measure(drv_t *d, int ci, int s, int place);

#endif
