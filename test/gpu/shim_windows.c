/* SPDX-License-Identifier: MIT
 * Symmetric windows, ncclCommRegister'ed buffers and rooted collectives through the NCCL API: two
 * processes on whatever GPUs there are (one is enough), libplanccl over the recording fake NCCL,
 * which computes nothing, so a right result ran on planccl's kernels and an untouched output was
 * forwarded. Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define WIN_BYTES (8u << 20)
#define BIG (256u << 10) /* above the default plans: only the zero-copy plan matches */
#define SMALL 1024u      /* floats of the broadcast and reduce checks */
#define POISON SHIM_MP_POISON

typedef struct {
  ncclUniqueId id;
  int ready, ngpus;
  shim_mp_barrier_t bar;
  char log[2][256];
} shared_t;

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  ncclWindow_t win = NULL;
  char *w = NULL, *reg = NULL;
  void *reg_handle = NULL, *host_handle = NULL, *ha = NULL, *hb = NULL;
  float *host = NULL;
  float *plain = NULL;
  cudaStream_t s = NULL, s2 = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  const size_t n = BIG / sizeof(float);
  (void)nranks;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&w, WIN_BYTES) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&plain, 2 * BIG) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&reg, WIN_BYTES) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMallocHost((void **)&host, 2 * BIG) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init(&sh->id, &sh->ready, rank, &comm) == ncclSuccess, 3);

  /* Unregistered: no plan may read a peer's buffers, so the call goes to the fake. */
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, plain, plain + n, n, s, rank, 0), 4);
  PCL_MP_CHECK(
      ncclCommWindowRegister(comm, w, WIN_BYTES, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 5);
  /* Inside the window, out of place at two offset pairs (each twice: the second finds its view),
   * then in place: the zero-copy plan. */
  for (int rep = 0; rep < 2; rep++) {
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)w, (float *)(w + BIG), n, s, rank, 1), 6);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)(w + 3 * BIG),
                                           (float *)(w + 5 * BIG + 4096), n, s, rank, 1),
                 7);
    PCL_MP_CHECK(
        shim_mp_allreduce_checked(comm, (float *)(w + BIG), (float *)(w + BIG), n, s, rank, 1), 8);
  }
  /* One buffer in the window and one outside: unregistered. */
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)w, plain, n, s, rank, 0), 9);
  /* Captured after its first eager call, replayed with new inputs. */
  PCL_MP_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, 10);
  PCL_MP_CHECK(ncclAllReduce(w, w + BIG, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, 10);
  PCL_MP_CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess, 10);
  PCL_MP_CHECK(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, 10);
  for (int rep = 0; rep < 3; rep++) {
    PCL_MP_CHECK(shim_mp_fill((float *)w, n, (float)(rank + 1 + rep)), 11);
    PCL_MP_CHECK(shim_mp_fill((float *)(w + BIG), n, POISON), 11);
    shim_mp_barrier(
        &sh->bar); /* no rank refills while its peer's kernel of the last replay still reads */
    PCL_MP_CHECK(cudaGraphLaunch(ge, s) == cudaSuccess, 11);
    PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 11);
    PCL_MP_CHECK(shim_mp_holds((float *)(w + BIG), n, (float)(3 + 2 * rep), 2.0f), 12);
    shim_mp_barrier(&sh->bar);
  }

  /* ncclCommRegister'ed buffers, at other offsets on each rank (no symmetry needed): exchanged at
   * their first call, kept for the next; in place too. */
  PCL_MP_CHECK(ncclCommRegister(comm, reg, WIN_BYTES, &reg_handle) == ncclSuccess, 24);
  char *rin = reg + (size_t)rank * 2 * BIG, *rout = reg + (size_t)(4 + rank) * BIG + 256;
  for (int rep = 0; rep < 2; rep++) {
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)rin, (float *)rout, n, s, rank, 1), 25);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)rout, (float *)rout, n, s, rank, 1), 26);
  }
  PCL_MP_CHECK(ncclCommDeregister(comm, reg_handle) == ncclSuccess, 27);
  reg_handle = NULL;
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)rin, (float *)rout, n, s, rank, 0), 28);

  /* Two registrations whose real handles are alike (the fake's are all NULL here, as NCCL's with
   * NCCL_LOCAL_REGISTER=0): deregistering the second forgets the second range and its pair, not
   * the first (which would keep a pair of memory the caller may free next). */
  PCL_MP_CHECK(ncclCommRegister(comm, reg, WIN_BYTES, &ha) == ncclSuccess &&
                   ncclCommRegister(comm, plain, 2 * BIG, &hb) == ncclSuccess && ha != hb,
               33);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, plain, plain + n, n, s, rank, 1), 33);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)rin, (float *)rout, n, s, rank, 1), 33);
  PCL_MP_CHECK(ncclCommDeregister(comm, hb) == ncclSuccess, 34);
  hb = NULL;
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, plain, plain + n, n, s, rank, 0), 34);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)rin, (float *)rout, n, s, rank, 1), 35);
  PCL_MP_CHECK(ncclCommDeregister(comm, ha) == ncclSuccess, 35);
  ha = NULL;

  /* Registered pinned host memory: the exchange fails on both ranks alike, is WARNed once and
   * not retried; the calls run unregistered (here: forwarded). */
  PCL_MP_CHECK(ncclCommRegister(comm, host, 2 * BIG, &host_handle) == ncclSuccess, 29);
  for (int rep = 0; rep < 2; rep++)
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, host, host + n, n, s, rank, 0), 30);
  fflush(stderr);
  PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "could not be exchanged") == 1, 31);
  PCL_MP_CHECK(ncclCommDeregister(comm, host_handle) == ncclSuccess, 32);
  host_handle = NULL;

  /* Broadcast and reduce from root 1, relabelled onto the root-0 plans. */
  float *a = plain, *b = plain + SMALL;
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(10 * (rank + 1))) && shim_mp_fill(b, SMALL, POISON),
               13);
  PCL_MP_CHECK(ncclBroadcast(a, b, SMALL, ncclFloat, 1, comm, s) == ncclSuccess, 13);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess && shim_mp_holds(b, SMALL, 20.0f, 1), 14);
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(10 * (rank + 1))), 15);
  PCL_MP_CHECK(ncclBroadcast(a, a, SMALL, ncclFloat, 1, comm, s) == ncclSuccess, 15);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess && shim_mp_holds(a, SMALL, 20.0f, 1), 16);
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(rank + 1)) && shim_mp_fill(b, SMALL, POISON), 17);
  PCL_MP_CHECK(ncclReduce(a, b, SMALL, ncclFloat, ncclSum, 1, comm, s) == ncclSuccess, 17);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 17);
  PCL_MP_CHECK(rank == 1 ? shim_mp_holds(b, SMALL, 3.0f, 2.0f) : shim_mp_holds(b, SMALL, POISON, 1),
               18);
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(rank + 1)), 19);
  PCL_MP_CHECK(ncclReduce(a, a, SMALL, ncclFloat, ncclSum, 1, comm, s) == ncclSuccess, 19);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 19);
  PCL_MP_CHECK(rank == 1 ? shim_mp_holds(a, SMALL, 3.0f, 2.0f) : shim_mp_holds(a, SMALL, 1.0f, 1),
               20);

  /* Placement seen differently: the root in place, the other rank passing NULL for the buffer
   * NCCL ignores there (so out of place in its view). The two ranks pick the two plans of the
   * shipped pair, whose non-root programs are alike (shim/dispatch/dispatch_decide.c,
   * placement_safe). */
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(10 * (rank + 1))) && shim_mp_fill(b, SMALL, POISON),
               38);
  PCL_MP_CHECK(ncclBroadcast(rank == 1 ? a : NULL, rank == 1 ? a : b, SMALL, ncclFloat, 1, comm,
                             s) == ncclSuccess,
               38);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess &&
                   shim_mp_holds(rank == 1 ? a : b, SMALL, 20.0f, 1),
               39);
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(rank + 1)), 40);
  PCL_MP_CHECK(ncclReduce(a, rank == 1 ? a : NULL, SMALL, ncclFloat, ncclSum, 1, comm, s) ==
                   ncclSuccess,
               40);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess, 40);
  PCL_MP_CHECK(rank == 1 ? shim_mp_holds(a, SMALL, 3.0f, 2.0f) : shim_mp_holds(a, SMALL, 1.0f, 1),
               41);

  /* Calls of one communicator on two streams, back to back with nothing between them (NCCL
   * orders a communicator's calls whatever their streams): planccl's kernels share the
   * communicator's flags and scratch, so they must not overlap either. */
  float *a2 = plain + 2 * SMALL, *b2 = plain + 3 * SMALL;
  PCL_MP_CHECK(shim_mp_fill(a, SMALL, (float)(10 * (rank + 1))) &&
                   shim_mp_fill(a2, SMALL, (float)(100 * (rank + 1))),
               36);
  for (int rep = 0; rep < 20; rep++)
    PCL_MP_CHECK(ncclBroadcast(a, b, SMALL, ncclFloat, 0, comm, s) == ncclSuccess &&
                     ncclBroadcast(a2, b2, SMALL, ncclFloat, 1, comm, s2) == ncclSuccess,
                 36);
  PCL_MP_CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaStreamSynchronize(s2) == cudaSuccess,
               36);
  PCL_MP_CHECK(shim_mp_holds(b, SMALL, 10.0f, 1) && shim_mp_holds(b2, SMALL, 200.0f, 1), 37);

  /* Deregistered: unregistered again (the graph goes first: it holds the view's program). */
  cudaGraphExecDestroy(ge);
  ge = NULL;
  cudaGraphDestroy(g);
  g = NULL;
  shim_mp_barrier(&sh->bar);
  PCL_MP_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, 21);
  win = NULL;
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, (float *)w, (float *)(w + BIG), n, s, rank, 0), 22);
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 23);
  comm = NULL;
out:
  if (ge != NULL)
    cudaGraphExecDestroy(ge);
  if (g != NULL)
    cudaGraphDestroy(g);
  if (win != NULL)
    ncclCommWindowDeregister(comm, win);
  if (reg_handle != NULL)
    ncclCommDeregister(comm, reg_handle);
  if (host_handle != NULL)
    ncclCommDeregister(comm, host_handle);
  if (ha != NULL)
    ncclCommDeregister(comm, ha);
  if (hb != NULL)
    ncclCommDeregister(comm, hb);
  if (comm != NULL)
    ncclCommAbort(comm);
  cudaFree(w);
  cudaFree(reg);
  cudaFreeHost(host);
  cudaFree(plain);
  if (s != NULL)
    cudaStreamDestroy(s);
  if (s2 != NULL)
    cudaStreamDestroy(s2);
  fflush(stderr);
  return rc;
}

/* Only the zero-copy allreduce and the broadcast and reduce plans. */
static const char *const plan_files[] = {
    "extra/allreduce/2gpu_zerocopy_inplace.json", "extra/allreduce/2gpu_zerocopy_outofplace.json",
    "extra/broadcast/2gpu_ll_inplace.json",       "extra/broadcast/2gpu_ll_outofplace.json",
    "extra/reduce/2gpu_ll_inplace.json",          "extra/reduce/2gpu_ll_outofplace.json"};

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  if (sh == NULL)
    return 1;
  setenv("PCL_FAKE_NULL_HANDLES", "1", 1); /* the fake NCCL's handles are all NULL */
  return shim_mp_main("shim_windows", plan_files, sizeof(plan_files) / sizeof(plan_files[0]),
                      rank_main, sh, &sh->ngpus, sh->log);
}
