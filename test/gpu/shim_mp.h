/* SPDX-License-Identifier: MIT
 * What the two-process NCCL-API GPU tests over the fake NCCL share (shim_faults.c,
 * shim_windows.c): a barrier in shared memory, a communicator whose id rank 0 makes, the GPU
 * count taken in a child (the parent never initialises CUDA before forking its ranks), and the
 * ranks' logs: searched, and printed after a failure. */
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

typedef struct {
  int arrived, generation;
} shim_mp_barrier_t;

/* Both ranks meet (the barrier lives in MAP_SHARED memory). */
static inline void shim_mp_barrier(shim_mp_barrier_t *b) {
  int gen = __atomic_load_n(&b->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&b->arrived, 1, __ATOMIC_ACQ_REL) == 2) {
    __atomic_store_n(&b->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&b->generation, 1, __ATOMIC_RELEASE);
    return;
  }
  while (__atomic_load_n(&b->generation, __ATOMIC_ACQUIRE) == gen)
    usleep(100);
}

/* A 2-rank communicator: rank 0 makes the id in shared memory and sets *ready, rank 1 waits. */
static inline ncclResult_t shim_mp_init(ncclUniqueId *id, int *ready, int rank, ncclComm_t *comm) {
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess)
      return r;
    __atomic_store_n(ready, 1, __ATOMIC_RELEASE);
  } else {
    while (!__atomic_load_n(ready, __ATOMIC_ACQUIRE))
      usleep(100);
  }
  return ncclCommInitRank(comm, 2, *id, rank);
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

#endif
