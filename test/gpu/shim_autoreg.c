/* SPDX-License-Identifier: MIT
 * Automatic registration (PLANCCL_AUTO_REG) through the NCCL API: two processes on whatever GPUs
 * there are (one is enough), libplanccl over the recording fake NCCL; above 32 KiB only the
 * zero-copy allreduce can plan, so a right sum there ran registered and an untouched output was
 * forwarded. Argument: the level (1: cuMem memory only, 2: cudaMalloc memory too). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define BIG (1u << 20) /* the default PLANCCL_AUTO_REG_MIN */
#define POISON SHIM_MP_POISON
#define LOGGED "registered automatically"
#define NFILL 64    /* PCL_VOTE_SLOTS */
#define NVIEWS 1024 /* PCL_AUTO_VIEWS */

typedef struct {
  ncclUniqueId id;
  int ready, ngpus, level;
  shim_mp_barrier_t bar;
  char log[2][256];
} shared_t;

/* The cuMem calls, from the driver (the test links no libcuda). */
static struct {
  CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*addr_free)(CUdeviceptr, size_t);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*unmap)(CUdeviceptr, size_t);
  CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
} cu;

static int cu_load(void) {
  static const char *const names[] = {
      "cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
      "cuMemMap",    "cuMemUnmap",   "cuMemSetAccess",      "cuMemGetAllocationGranularity"};
  void **slot = (void **)&cu;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(names[i], &slot[i], 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return 0;
  }
  return 1;
}

/* A cuMem buffer of two mappings side by side (as PyTorch's expandable segments), with a third
 * allocation in reserve to remap the second with. */
typedef struct {
  CUdeviceptr va;
  size_t gran;
  CUmemGenericAllocationHandle h[3];
  int mapped1; /* which of h[1], h[2] backs the second half */
} seg_t;

static CUmemAllocationProp seg_prop(int dev) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

static int seg_map(seg_t *g, int dev, size_t off, int h) {
  CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  return cu.map(g->va + off, g->gran, 0, g->h[h], 0) == CUDA_SUCCESS &&
         cu.access(g->va + off, g->gran, &a, 1) == CUDA_SUCCESS;
}

static int seg_make(seg_t *g, int dev) {
  CUmemAllocationProp p = seg_prop(dev);
  memset(g, 0, sizeof(*g));
  if (cu.granularity(&g->gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      g->gran < BIG || cu.reserve(&g->va, 2 * g->gran, 0, 0, 0) != CUDA_SUCCESS)
    return 0;
  for (int i = 0; i < 3; i++)
    if (cu.create(&g->h[i], g->gran, &p, 0) != CUDA_SUCCESS)
      return 0;
  g->mapped1 = 1;
  return seg_map(g, dev, 0, 0) && seg_map(g, dev, g->gran, 1);
}

/* The second half now backed by the other spare allocation: the same addresses, other memory. */
static int seg_remap(seg_t *g, int dev) {
  g->mapped1 = g->mapped1 == 1 ? 2 : 1;
  return cu.unmap(g->va + g->gran, g->gran) == CUDA_SUCCESS && seg_map(g, dev, g->gran, g->mapped1);
}

static void seg_free(seg_t *g) {
  if (g->va == 0)
    return;
  cu.unmap(g->va, 2 * g->gran); /* both halves; an unmapped one fails harmlessly */
  cu.unmap(g->va, g->gran);
  cu.unmap(g->va + g->gran, g->gran);
  for (int i = 0; i < 3; i++)
    if (g->h[i] != 0)
      cu.release(g->h[i]);
  cu.addr_free(g->va, 2 * g->gran);
}

static int logged(shared_t *sh, int rank) {
  fflush(stderr);
  return shim_mp_log_count(sh->log[rank], LOGGED);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0, dev = 0;
  ncclComm_t comm = NULL;
  float *a = NULL, *b = NULL, *c = NULL, *big = NULL, *small = NULL, *fresh = NULL;
  float *fill[NFILL] = {NULL};
  cudaStream_t s = NULL;
  cudaGraph_t gr = NULL;
  cudaGraphExec_t ge = NULL;
  seg_t seg = {0};
  const size_t n = BIG / sizeof(float);
  const int cm = sh->level >= 2; /* cudaMalloc memory is registered */
  int want = 0;
  (void)nranks;
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  dev = rank % sh->ngpus;
  PCL_MP_CHECK(cudaSetDevice(dev) == cudaSuccess && cu_load(), 2);
  PCL_MP_CHECK(cudaMalloc((void **)&a, BIG) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&b, BIG) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&small, 2 * 65536) == cudaSuccess, 2);
  PCL_MP_CHECK(seg_make(&seg, dev), 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init(&sh->id, &sh->ready, rank, &comm) == ncclSuccess, 3);

  /* Ordinary cudaMalloc buffers: their two allocations exchanged at the first call, found again
   * at the second. */
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, a, b, n, s, rank, cm), 4);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, a, b, n, s, rank, cm), 4);
  PCL_MP_CHECK(logged(sh, rank) == (want += 2 * cm), 4);
  /* In place in a known allocation: nothing new. */
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, b, b, n, s, rank, cm), 6);
  PCL_MP_CHECK(logged(sh, rank) == want, 6);
  /* One allocation of four buffers: exchanged once (output and input in it), then every rank
   * passes other buffers of it, at offsets of its own: no exchange, and a wrong peer offset
   * would add the wrong rank's values or poison. */
  PCL_MP_CHECK(cudaMalloc((void **)&big, 4 * BIG) == cudaSuccess, 19);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, big, big + 2 * n, n, s, rank, cm), 19);
  PCL_MP_CHECK(logged(sh, rank) == (want += cm), 19);
  for (int rep = 0; rep < 3; rep++) {
    float *in = big + (size_t)((rank + rep) % 4) * n,
          *out = big + (size_t)((rank + rep + 2) % 4) * n;
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in, out, n, s, rank, cm), 20);
  }
  PCL_MP_CHECK(logged(sh, rank) == want, 20);
  /* Freed and allocated again (the allocator likely hands back the same address): the identity
   * changed, so that allocation is exchanged anew. */
  PCL_MP_CHECK(cudaFree(a) == cudaSuccess, 7);
  a = NULL;
  PCL_MP_CHECK(cudaMalloc((void **)&a, BIG) == cudaSuccess, 7);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, a, b, n, s, rank, cm), 7);
  PCL_MP_CHECK(logged(sh, rank) == (want += cm), 7);
  /* The ranks disagree: rank 0 passes a new buffer, rank 1 one it holds. The vote makes both
   * exchange the input's allocation; afterwards both hold it in the new slot. */
  PCL_MP_CHECK(cudaMalloc((void **)&c, BIG) == cudaSuccess, 8);
  for (int rep = 0; rep < 2; rep++)
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, rank == 0 ? c : a, b, n, s, rank, cm), 8);
  PCL_MP_CHECK(logged(sh, rank) == (want += cm), 8);

  /* cuMem memory of two mappings, the buffer across their border: registered at every level. */
  float *sb = (float *)(uintptr_t)(seg.va + seg.gran - BIG / 2);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, sb, sb, n, s, rank, 1), 9);
  PCL_MP_CHECK(logged(sh, rank) == ++want, 9);
  /* The second mapping replaced by other memory at the same addresses: were the old registration
   * used, the peer would add the last sums still held by the old memory. */
  PCL_MP_CHECK(cudaDeviceSynchronize() == cudaSuccess && seg_remap(&seg, dev), 10);
  shim_mp_barrier(&sh->bar);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, sb, sb, n, s, rank, 1), 10);
  PCL_MP_CHECK(logged(sh, rank) == ++want, 10);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, sb, sb, n, s, rank, 1), 10);
  PCL_MP_CHECK(logged(sh, rank) == want, 10);
  /* Other buffers of that span, each inside one mapping, each rank at its own offsets: found in
   * the span's slot (checked against the span's mappings), no exchange. */
  {
    const CUdeviceptr g = seg.va, h = seg.gran;
    float *in = (float *)(uintptr_t)(rank == 0 ? g : g + h);
    float *out = (float *)(uintptr_t)(rank == 0 ? g + 2 * h - BIG : g + h - BIG);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in, out, n, s, rank, 1), 21);
    PCL_MP_CHECK(logged(sh, rank) == want, 21);
  }

  /* A freed allocation no call names again is still found (one slot looked at per call) and
   * dropped on every rank within a table's worth of calls. */
  {
    char gone[96];
    snprintf(gone, sizeof(gone), "allocation %p +%u dropped: its memory changed", (void *)big,
             4 * BIG);
    PCL_MP_CHECK(cudaFree(big) == cudaSuccess, 22);
    big = NULL;
    for (int k = 0; k < 64; k++)
      PCL_MP_CHECK(shim_mp_allreduce_checked(comm, sb, sb, n, s, rank, 1), 22);
    fflush(stderr);
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], gone) == cm, 22);
  }

  /* Below PLANCCL_AUTO_REG_MIN: never registered (the small plan runs it unregistered). */
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, small, small + 4096, 4096, s, rank, 1), 11);
  PCL_MP_CHECK(logged(sh, rank) == want, 11);
  /* In a group, and in a capture: unregistered, even for buffers already held. */
  PCL_MP_CHECK(shim_mp_fill(b, n, POISON), 12);
  PCL_MP_CHECK(ncclGroupStart() == ncclSuccess, 12);
  PCL_MP_CHECK(ncclAllReduce(sb, b, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, 12);
  PCL_MP_CHECK(ncclGroupEnd() == ncclSuccess && cudaStreamSynchronize(s) == cudaSuccess, 12);
  PCL_MP_CHECK(shim_mp_holds(b, n, POISON, 1), 12);
  PCL_MP_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, 13);
  PCL_MP_CHECK(ncclAllReduce(sb, sb, n, ncclFloat, ncclSum, comm, s) == ncclSuccess, 13);
  PCL_MP_CHECK(cudaStreamEndCapture(s, &gr) == cudaSuccess, 13);
  PCL_MP_CHECK(cudaGraphInstantiate(&ge, gr, 0) == cudaSuccess, 13);
  PCL_MP_CHECK(shim_mp_fill(sb, n, (float)(rank + 1)), 13);
  PCL_MP_CHECK(cudaGraphLaunch(ge, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess,
               13);
  PCL_MP_CHECK(shim_mp_holds(sb, n, (float)(rank + 1), 1), 13);
  PCL_MP_CHECK(logged(sh, rank) == want, 13);

  /* Rank 0 in a capture (global mode, as PyTorch captures) while rank 1, outside one, finds its
   * slot stale (its input freed and made again): the round runs unregistered (forwarded), and
   * rank 0 must not drop its copy of that slot inside the capture (it would synchronise
   * and free, which invalidates the capture); it drops it at its next call outside, where both
   * then exchange that allocation anew. */
  if (rank == 1) {
    PCL_MP_CHECK(cudaFree(a) == cudaSuccess, 16);
    a = NULL;
    PCL_MP_CHECK(cudaMalloc((void **)&a, BIG) == cudaSuccess, 16);
  }
  float *in0 = rank == 0 ? c : a;
  PCL_MP_CHECK(shim_mp_fill(in0, n, (float)(rank + 1)) && shim_mp_fill(b, n, POISON), 16);
  shim_mp_barrier(&sh->bar);
  if (rank == 0) {
    cudaGraph_t g2 = NULL;
    cudaGraphExec_t ge2 = NULL;
    usleep(200 * 1000); /* rank 1 has voted by then: its stale slot is known in the capture */
    PCL_MP_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, 16);
    ncclResult_t r2 = ncclAllReduce(c, b, n, ncclFloat, ncclSum, comm, s);
    cudaError_t e2 = cudaStreamEndCapture(s, &g2);
    int ok = r2 == ncclSuccess && e2 == cudaSuccess && g2 != NULL &&
             cudaGraphInstantiate(&ge2, g2, 0) == cudaSuccess &&
             cudaGraphLaunch(ge2, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
    if (ge2 != NULL)
      cudaGraphExecDestroy(ge2);
    if (g2 != NULL)
      cudaGraphDestroy(g2);
    if (!ok)
      fprintf(stderr, "capture beside a stale slot: call %d, end capture %s\n", (int)r2,
              cudaGetErrorString(e2));
    PCL_MP_CHECK(ok, 17);
  } else {
    PCL_MP_CHECK(ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, s) == ncclSuccess &&
                     cudaStreamSynchronize(s) == cudaSuccess,
                 17);
  }
  PCL_MP_CHECK(shim_mp_holds(b, n, POISON, 1) && logged(sh, rank) == want, 17);
  PCL_MP_CHECK(shim_mp_allreduce_checked(comm, in0, b, n, s, rank, cm), 18);
  PCL_MP_CHECK(logged(sh, rank) == (want += cm), 18);

  /* More buffers than the views kept (PCL_AUTO_VIEWS): every rank's offset inside the cuMem
   * span moves by 2 KiB a call, the ranks half the range apart; the least recently used views
   * go (with their programs) and come back when their buffers do. No exchange. */
  for (int k = 0; k <= NVIEWS + 1; k++) {
    const size_t at = (size_t)((k + rank * NVIEWS / 2) % (NVIEWS + 1)) * 2048;
    float *v = (float *)(uintptr_t)(seg.va + at);
    PCL_MP_CHECK(at + BIG <= 2 * seg.gran, 26);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, v, v, n, s, rank, 1), 26);
  }
  PCL_MP_CHECK(logged(sh, rank) == want, 26);

  /* A full table (cudaMalloc memory, level 2): 64 new allocations take every slot, the oldest
   * going first. Then a call whose input is in the oldest slot and whose output is new: the
   * output's exchange must evict another slot, not the one the input is about to use. */
  if (cm) {
    for (int k = 0; k < NFILL; k++) {
      PCL_MP_CHECK(cudaMalloc((void **)&fill[k], BIG) == cudaSuccess, 23);
      PCL_MP_CHECK(shim_mp_allreduce_checked(comm, fill[k], fill[k], n, s, rank, 1), 23);
    }
    PCL_MP_CHECK(logged(sh, rank) == (want += NFILL), 23);
    PCL_MP_CHECK(cudaMalloc((void **)&fresh, BIG) == cudaSuccess, 24);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, fill[0], fresh, n, s, rank, 1), 24);
    PCL_MP_CHECK(logged(sh, rank) == (want += 1), 24);
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, fill[0], fill[0], n, s, rank, 1), 25);
    PCL_MP_CHECK(logged(sh, rank) == want, 25); /* still held */
    PCL_MP_CHECK(shim_mp_allreduce_checked(comm, fill[1], fill[1], n, s, rank, 1), 25);
    PCL_MP_CHECK(logged(sh, rank) == (want += 1), 25); /* evicted for `fresh` */
  }

  /* A rank that skips a call: the other's call fails within PLANCCL_BOOTSTRAP_TIMEOUT_S (3 s),
   * and so does every later registrable call; nothing hangs. On the cuMem buffer, which votes at
   * every level (a "no" vote, such as cudaMalloc memory's at level 1, never waits). */
  if (rank == 0) {
    double t0 = now_s();
    PCL_MP_CHECK(ncclAllReduce(sb, sb, n, ncclFloat, ncclSum, comm, s) != ncclSuccess, 14);
    PCL_MP_CHECK(now_s() - t0 < 30, 14);
    PCL_MP_CHECK(ncclAllReduce(sb, sb, n, ncclFloat, ncclSum, comm, s) != ncclSuccess, 14);
  }
  shim_mp_barrier(&sh->bar);
  PCL_MP_CHECK(ncclCommAbort(comm) == ncclSuccess, 15);
  comm = NULL;
out:
  if (ge != NULL)
    cudaGraphExecDestroy(ge);
  if (gr != NULL)
    cudaGraphDestroy(gr);
  if (comm != NULL)
    ncclCommAbort(comm);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(big);
  cudaFree(small);
  cudaFree(fresh);
  for (int k = 0; k < NFILL; k++)
    cudaFree(fill[k]);
  seg_free(&seg);
  if (s != NULL)
    cudaStreamDestroy(s);
  fflush(stderr);
  return rc;
}

/* The zero-copy allreduce, and a small one (a communicator needs a plan for unregistered calls to
 * be planned at all). */
static const char *const plan_files[] = {
    "extra/allreduce/2gpu_zerocopy_inplace.json", "extra/allreduce/2gpu_zerocopy_outofplace.json",
    "allreduce/2gpu_ll1_inplace.json", "allreduce/2gpu_ll1_outofplace.json"};

int main(int argc, char **argv) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  char level[8];
  if (sh == NULL)
    return 1;
  sh->level = argc > 1 ? atoi(argv[1]) : 2;
  snprintf(level, sizeof(level), "%d", sh->level);
  setenv("PLANCCL_AUTO_REG", level, 1);
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "SHIM", 1);
  setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "3", 1);
  printf("shim_autoreg: level %d\n", sh->level);
  return shim_mp_main("shim_autoreg", plan_files, sizeof(plan_files) / sizeof(plan_files[0]),
                      rank_main, sh, &sh->ngpus, sh->log);
}
