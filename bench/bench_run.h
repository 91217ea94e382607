/* SPDX-License-Identifier: MIT
 * One measured run of one library (bench_run.c, the CUDA side of planccl-bench): every placement,
 * collective and size of the options, eager and graph, each result checked, in the process
 * model the options name (a thread per GPU, one thread for all, or a process per GPU). */
#ifndef PCL_BENCH_RUN_H
#define PCL_BENCH_RUN_H

#include "bench_hostpath.h"
#include "bench_lib.h"
#include "bench_report.h"
#include "bench_time.h" /* bench_now_us */

typedef struct {
  const bench_opts_t *o;
  int l;                  /* index of the library in o->libs */
  bench_lib_t *lib;       /* opened by the caller; the proc model's children open their own */
  const char *env_log;    /* proc model: the PLANCCL_DEBUG_FILE its children set; NULL: none */
  bench_result_t *ranks;  /* [o->ngpus], written per rank (bench_shm_alloc memory) */
  bench_hostpath_t *host; /* --hostpath: rank 0's measurement */
  int *done;              /* progress units done (bench_shm_alloc memory), of `total` */
  int total;
  double start_us;
} bench_job_t;

/* 0, or -1 after naming the failure on stderr (the library is then not measured). */
int bench_run_lib(bench_job_t *job);

/* The GPUs this machine has, counted in a child process when `keep_parent_clean` (the proc
 * model forks after, and CUDA does not survive a fork); -1 when CUDA cannot tell. */
int bench_gpu_count(int keep_parent_clean);

/* Asks planccl (through its environment, read once at its first use) to log the path of each
 * (collective, size class, placement) to `log`, unless the user set PLANCCL_DEBUG. */
void bench_path_log_env(const char *log);

#endif
