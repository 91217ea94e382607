/* SPDX-License-Identifier: MIT
 * The executor's program table through the NCCL API: many message sizes on a communicator that
 * keeps few programs (PLANCCL_EXEC_PROGRAMS=16), so programs are evicted and rebuilt, while a
 * graph captured after eviction began still replays right. Two processes, libplanccl over the
 * recording fake NCCL (a right result ran on planccl's kernels). Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

/* Sizes 16 bytes apart (8 per rank): the finest step the LL plans take (others go to NCCL). */
#define FIRST 200  /* sizes before the capture */
#define LATER 100  /* sizes between the capture and its replays */
#define MAXN 16384 /* floats of the largest call */

typedef struct {
  ncclUniqueId id;
  int ready, ngpus;
  shim_mp_barrier_t bar;
  char log[2][256];
} shared_t;

/* The counts of the table's INFO line at destroy ("N programs built, E evicted, R of them
 * rebuilt"): 0 with *ev and *rb set, -1 when the line is missing. */
static int counts_in_log(const char *path, long *ev, long *rb) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int found = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof(line), f)) {
    const char *p = strstr(line, " programs built, ");
    if (p != NULL && sscanf(p, " programs built, %ld evicted, %ld of them rebuilt", ev, rb) == 2)
      found = 0;
  }
  fclose(f);
  return found;
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  float *in = NULL, *out = NULL;
  cudaStream_t s = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  /* The captured call's floats: a size of its own, larger than every later one, so a later
   * program in its image (evicted without a pin) would leave the tail of its output alone. */
  const size_t ng = 8000;
  (void)nranks;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&in, MAXN * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&out, MAXN * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init(&sh->id, &sh->ready, rank, &comm) == ncclSuccess, 3);

  /* Many sizes, each a program: the table fills and starts evicting. */
  for (int k = 0; k < FIRST; k++)
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in, out, 64 + 4 * (size_t)k, s, rank, 1), 4);
  /* Captured now: its program is newer than the table's kept ones, so it must be pinned. */
  PCL_MP_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, 5);
  PCL_MP_CHECK(ncclAllReduce(in, out, ng, ncclFloat, ncclSum, comm, s) == ncclSuccess, 5);
  PCL_MP_CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, 5);
  PCL_MP_CHECK(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, 5);
  /* Many more sizes: evicted images are reused by new programs of the same size class. */
  for (int k = 0; k < LATER; k++)
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in, out, 5000 + 4 * (size_t)k, s, rank, 1), 6);
  for (int rep = 0; rep < 3; rep++) {
    PCL_MP_CHECK(shim_mp_fill(in, ng, (float)(rank + 1 + rep)), 7);
    PCL_MP_CHECK(shim_mp_fill(out, ng, SHIM_MP_POISON), 7);
    shim_mp_barrier(&sh->bar); /* no rank refills while its peer's last replay still reads */
    PCL_MP_CHECK(cudaGraphLaunch(ge, s) == cudaSuccess, 7);
    PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 7);
    PCL_MP_CHECK(shim_mp_holds(out, ng, (float)(3 + 2 * rep), 2.0f), 8);
    shim_mp_barrier(&sh->bar);
  }
  /* Back to the first sizes: rebuilt where evicted, alike on both ranks. */
  for (int k = 0; k < 50; k++)
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in, out, 64 + 4 * (size_t)k, s, rank, 1), 9);
  cudaGraphExecDestroy(ge);
  ge = NULL;
  cudaGraphDestroy(g);
  g = NULL;
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 10);
  comm = NULL;
  fflush(stderr);
  /* 16 kept + 16 newer of 351 shapes: 168 + 101 evictions before the last loop; there, 34 of
   * the first sizes come back, are counted as rebuilt, and make the table grow (after 8). The
   * filter of evicted keys is direct-mapped by a hash that differs per process (it hashes plan
   * addresses): a collision may hide a rebuild or two. */
  long ev = -1, rb = -1;
  PCL_MP_CHECK(counts_in_log(sh->log[rank], &ev, &rb) == 0, 11);
  if (ev < 270 || rb < 30 || rb > 34)
    fprintf(stderr, "shim_programs: %ld evicted (want >= 270), %ld rebuilt (want 30-34)\n", ev, rb);
  PCL_MP_CHECK(ev >= 270 && rb >= 30 && rb <= 34, 11);
  PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "the table now holds up to 64 more") == 1, 12);
out:
  if (ge != NULL)
    cudaGraphExecDestroy(ge);
  if (g != NULL)
    cudaGraphDestroy(g);
  shim_mp_release(comm, in, out, s);
  return rc;
}

static const char *const plan_files[] = {
    "allreduce/2gpu_ll1_small_inplace.json", "allreduce/2gpu_ll1_small_outofplace.json",
    "allreduce/2gpu_ll1_inplace.json", "allreduce/2gpu_ll1_outofplace.json"};

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  if (sh == NULL)
    return 1;
  setenv("PLANCCL_EXEC_PROGRAMS", "16", 1);
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "EXEC", 1);
  return shim_mp_main("shim_programs", plan_files, sizeof(plan_files) / sizeof(plan_files[0]),
                      rank_main, sh, &sh->ngpus, sh->log);
}
