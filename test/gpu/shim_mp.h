/* SPDX-License-Identifier: MIT
 * What the multi-process NCCL-API GPU tests over the fake NCCL share (shim_faults.c,
 * shim_windows.c, shim_multinode.c ...): a barrier in shared memory, a communicator whose id rank
 * 0 makes, the GPU count taken in a child (the parent never initialises CUDA before forking its
 * ranks), and the ranks' logs: searched, and printed after a failure. */
#ifndef PCL_SHIM_MP_H
#define PCL_SHIM_MP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"

typedef struct {
  int arrived, generation;
} shim_mp_barrier_t;

/* The n ranks meet (the barrier lives in MAP_SHARED memory). */
static inline void shim_mp_barrier_n(shim_mp_barrier_t *b, int n) {
  int gen = __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_ACQ_REL) == n) {
    __atomic_store_n(&b->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&b->generation, 1, __ATOMIC_RELEASE);
    return;
  }
  while (__atomic_load_n(&b->generation, __ATOMIC_ACQUIRE) == gen)
    usleep(100);
}

static inline void shim_mp_barrier(shim_mp_barrier_t *b) {
  shim_mp_barrier_n(b, 2);
}

/* An n-rank communicator: rank 0 makes the id in shared memory and sets *ready, the others
 * wait. */
static inline ncclResult_t shim_mp_init_n(ncclUniqueId *id, int *ready, int rank, int n,
                                          ncclComm_t *comm) {
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess)
      return r;
    __atomic_store_n(ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(ready, __ATOMIC_ACQUIRE))
      usleep(100);
  }
  return ncclCommInitRank(comm, n, *id, rank);
}

static inline ncclResult_t shim_mp_init(ncclUniqueId *id, int *ready, int rank, ncclComm_t *comm) {
  return shim_mp_init_n(id, ready, rank, 2, comm);
}

/* How many lines of the file at `path` contain `what` (0 when it cannot be read). */
static inline int shim_mp_log_count(const char *path, const char *what) {
  char line[1024];
  int n = 0;
  FILE *f = fopen(path, "r");
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    n += strstr(line, what) != NULL;
  if (f != NULL)
    fclose(f);
  return n;
}

/* The number of GPUs, counted in a child process; 0 when CUDA finds none. */
static inline int shim_mp_gpu_count(void) {
  pid_t p = fork();
  if (p == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess ? (n > 0 ? (n < 100 ? n : 99) : 0) : 0);
  }
  int st = 0;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

/* Zeroed memory both ranks share, or NULL. */
static inline void *shim_mp_shared(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  memset(p, 0, bytes);
  return p;
}

/* Names each rank's stderr file after the test and this process. */
static inline void shim_mp_log_names(char log[][256], int nranks, const char *test) {
  for (int r = 0; r < nranks; r++)
    snprintf(log[r], 256, "/tmp/pcl_%s_%d_%d.log", test, (int)getpid(), r);
}

/* Prints the tail of each rank's stderr file when the run failed, then removes the files. */
static inline void shim_mp_logs(char log[][256], int nranks, int failed) {
  for (int r = 0; r < nranks; r++) {
    if (failed) {
      char cmd[320];
      snprintf(cmd, sizeof(cmd), "tail -20 %s", log[r]);
      printf("--- rank %d log:\n", r);
      fflush(stdout);
      if (system(cmd) != 0)
        printf("(no log)\n");
    }
    unlink(log[r]);
  }
}

/* A rank's usual leftovers at its end: the communicator aborted if still there, two device
 * buffers, a stream; stderr flushed for the parent to read. */
static inline void shim_mp_release(ncclComm_t comm, void *a, void *b, cudaStream_t s) {
  if (comm != NULL)
    ncclCommAbort(comm);
  cudaFree(a);
  cudaFree(b);
  if (s != NULL)
    cudaStreamDestroy(s);
  fflush(stderr);
}

#define SHIM_MP_POISON -7.0f /* what a forwarded call leaves in an out-of-place output */

/* d[i] = v + (i % 7). */
static inline int shim_mp_fill(float *d, size_t n, float v) {
  float *h = (float *)malloc(n * sizeof(float));
  if (h == NULL)
    return 0;
  for (size_t i = 0; i < n; i++)
    h[i] = v + (float)(i % 7);
  int ok = cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess;
  free(h);
  return ok;
}

/* 1 when d[i] == v + (i % 7) * k for all i (k = 0: d[i] == v). */
static inline int shim_mp_holds(const float *d, size_t n, float v, float k) {
  float *h = (float *)malloc(n * sizeof(float));
  int ok = h != NULL && cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (size_t i = 0; ok && i < n; i++)
    ok = h[i] == v + (float)(i % 7) * k;
  free(h);
  return ok;
}

/* An n-rank float sum of (rank + 1) + (i % 7), n (n + 1) / 2 + n (i % 7): want_planned = 1
 * checks that sum, 0 that the call was forwarded to the fake NCCL, which computes nothing (the
 * output keeps SHIM_MP_POISON, or in place the input). */
static inline int shim_mp_allreduce_checked_n(ncclComm_t comm, float *in, float *out, size_t cnt,
                                              cudaStream_t s, int rank, int n, int want_planned) {
  if (!shim_mp_fill(in, cnt, (float)(rank + 1)) ||
      (in != out && !shim_mp_fill(out, cnt, SHIM_MP_POISON)))
    return 0;
  if (ncclAllReduce(in, out, cnt, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return 0;
  if (want_planned)
    return shim_mp_holds(out, cnt, (float)(n * (n + 1) / 2), (float)n);
  return in == out ? shim_mp_holds(out, cnt, (float)(rank + 1), 1)
                   : shim_mp_holds(out, cnt, SHIM_MP_POISON, 1);
}

static inline int shim_mp_allreduce_checked(ncclComm_t comm, float *in, float *out, size_t n,
                                            cudaStream_t s, int rank, int want_planned) {
  return shim_mp_allreduce_checked_n(comm, in, out, n, s, rank, 2, want_planned);
}

/* A temporary plan directory at dir (len >= 64) holding links to the source tree's plans/<files>
 * (PCL_SOURCE_DIR, else the tree the test was built from); 1 on success. */
static inline int shim_mp_plan_dir(char *dir, size_t len, const char *test,
                                   const char *const *files, size_t nfiles) {
  const char *src = getenv("PCL_SOURCE_DIR") ? getenv("PCL_SOURCE_DIR") : PCL_TEST_SOURCE_DIR;
  snprintf(dir, len, "/tmp/pcl_%s_XXXXXX", test);
  if (mkdtemp(dir) == NULL)
    return 0;
  for (size_t i = 0; i < nfiles; i++) {
    char from[1024], to[1024];
    snprintf(from, sizeof(from), "%s/plans/%s", src, files[i]);
    snprintf(to, sizeof(to), "%s/%zu_%s", dir, i, strrchr(files[i], '/') + 1);
    if (symlink(from, to) != 0)
      return 0;
  }
  return 1;
}

/* A test's main: 77 without a GPU (*ngpus gets the count), else fn as `nranks` forked ranks over
 * a plan directory of `files` (PLANCCL_PLAN_DIR), each rank's stderr in log[rank], shown when the
 * run failed; returns the exit status. */
static inline int shim_mp_main_n(const char *test, const char *const *files, size_t nfiles,
                                 int nranks, pcl_mp_rank_fn fn, void *arg, int *ngpus,
                                 char log[][256]) {
  char dir[256], cmd[300];
  *ngpus = shim_mp_gpu_count();
  if (*ngpus == 0) {
    printf("%s: no GPU: skipped\n", test);
    return 77;
  }
  if (!shim_mp_plan_dir(dir, sizeof(dir), test, files, nfiles)) {
    printf("%s: cannot make the plan directory\n", test);
    return 1;
  }
  setenv("PLANCCL_PLAN_DIR", dir, 1);
  shim_mp_log_names(log, nranks, test);
  int codes[64] = {0};
  int rc = nranks <= 64 ? pcl_mp_run(nranks, fn, arg, 120, codes) : 1;
  printf("%s: rank codes", test);
  for (int r = 0; r < nranks && r < 64; r++)
    printf(" %d", codes[r]);
  printf("\n");
  shim_mp_logs(log, nranks, rc != 0);
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("%s: could not remove %s\n", test, dir);
  printf("%s: %s\n", test, rc == 0 ? "passed" : "FAILED");
  return rc == 0 ? 0 : 1;
}

static inline int shim_mp_main(const char *test, const char *const *files, size_t nfiles,
                               pcl_mp_rank_fn fn, void *arg, int *ngpus, char log[][256]) {
  return shim_mp_main_n(test, files, nfiles, 2, fn, arg, ngpus, log);
}

#endif
