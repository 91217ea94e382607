/* SPDX-License-Identifier: MIT
 * NCCL 2.29+ functions through planccl against the same real NCCL called directly, one rank on
 * one GPU: ncclCommGetUniqueId, ncclCommMemStats, ncclCommSuspend/Resume (planccl refuses calls
 * between them), ncclCommQueryProperties. Each gives through planccl what the real library gives
 * (return code and value); a function the real library lacks is refused with ncclInvalidUsage.
 * The real library is PLANCCL_NCCL_LIB (the fake in ctest). Exits 77 without a GPU. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

/* Declared here with the types as their ABI passes them (enums as int, structs by pointer):
 * the toolkit's nccl.h may predate them. */
typedef ncclResult_t (*get_id_fn)(ncclComm_t, ncclUniqueId *);
typedef ncclResult_t (*mem_stats_fn)(ncclComm_t, int, uint64_t *);
typedef ncclResult_t (*suspend_fn)(ncclComm_t, int);
typedef ncclResult_t (*resume_fn)(ncclComm_t);
typedef ncclResult_t (*query_fn)(ncclComm_t, void *);
typedef ncclResult_t (*init_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*uid_fn)(ncclUniqueId *);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);
typedef ncclResult_t (*version_fn)(int *);

#define SUSPEND_MEM 0x01 /* NCCL_SUSPEND_MEM */
#define STAT_SUSPENDED 1 /* ncclStatGpuMemSuspended */

static int failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL: " __VA_ARGS__);                                                                \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* The two sides of one function: planccl's export and the real library's, or NULL. */
#define BOTH(type, name)                                                                           \
  type mine_##name = (type)dlsym(RTLD_DEFAULT, #name), real_##name = (type)dlsym(real, #name)

static void compare_rc(const char *what, ncclResult_t mine, ncclResult_t theirs, int have) {
  if (have)
    EXPECT(mine == theirs, "%s: planccl %d, real NCCL %d", what, mine, theirs);
  else
    EXPECT(mine == ncclInvalidUsage, "%s: the real NCCL lacks it, planccl gave %d", what, mine);
  printf("%-28s planccl rc %d, real %s %d\n", what, mine, have ? "rc" : "lacks it:", theirs);
}

int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("shim_real_api: no GPU: skipped\n");
    return 77;
  }
  const char *path = getenv("PLANCCL_NCCL_LIB");
  void *real = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) : NULL;
  if (real == NULL) {
    printf("shim_real_api: PLANCCL_NCCL_LIB must name the real NCCL (%s)\n", dlerror());
    return 1;
  }
  cudaSetDevice(0);
  init_fn real_init = (init_fn)dlsym(real, "ncclCommInitRank");
  uid_fn real_uid = (uid_fn)dlsym(real, "ncclGetUniqueId");
  destroy_fn real_destroy = (destroy_fn)dlsym(real, "ncclCommDestroy");
  version_fn real_version = (version_fn)dlsym(real, "ncclGetVersion");
  int v = 0;
  if (real_version)
    real_version(&v);
  printf("shim_real_api: real NCCL %s, version code %d\n", path, v);
  ncclUniqueId a, b;
  ncclComm_t mine = NULL, theirs = NULL;
  if (ncclGetUniqueId(&a) != ncclSuccess || ncclCommInitRank(&mine, 1, a, 0) != ncclSuccess ||
      real_uid(&b) != ncclSuccess || real_init(&theirs, 1, b, 0) != ncclSuccess) {
    printf("shim_real_api: FAIL: one-rank communicators\n");
    return 1;
  }

  BOTH(get_id_fn, ncclCommGetUniqueId);
  ncclUniqueId ia, ib;
  compare_rc("ncclCommGetUniqueId", mine_ncclCommGetUniqueId(mine, &ia),
             real_ncclCommGetUniqueId ? real_ncclCommGetUniqueId(theirs, &ib) : ncclInvalidUsage,
             real_ncclCommGetUniqueId != NULL);

  BOTH(mem_stats_fn, ncclCommMemStats);
  for (int s = 0; s < 4; s++) {
    uint64_t va = 0, vb = 0;
    char what[64];
    snprintf(what, sizeof(what), "ncclCommMemStats(%d)", s);
    ncclResult_t ra = mine_ncclCommMemStats(mine, s, &va);
    ncclResult_t rb =
        real_ncclCommMemStats ? real_ncclCommMemStats(theirs, s, &vb) : ncclInvalidUsage;
    compare_rc(what, ra, rb, real_ncclCommMemStats != NULL);
    if (real_ncclCommMemStats && ra == ncclSuccess)
      printf("%-28s planccl's communicator %llu, the real one %llu\n", what, (unsigned long long)va,
             (unsigned long long)vb);
  }

  /* Query properties into a zeroed buffer larger than any release's struct. */
  BOTH(query_fn, ncclCommQueryProperties);
  static char pa[4096], pb[4096];
  compare_rc("ncclCommQueryProperties", mine_ncclCommQueryProperties(mine, pa),
             real_ncclCommQueryProperties ? real_ncclCommQueryProperties(theirs, pb)
                                          : ncclInvalidUsage,
             real_ncclCommQueryProperties != NULL);

  /* Suspend: collectives refused until resume; the real state follows. */
  BOTH(suspend_fn, ncclCommSuspend);
  BOTH(resume_fn, ncclCommResume);
  ncclResult_t sa = mine_ncclCommSuspend(mine, SUSPEND_MEM);
  ncclResult_t sb =
      real_ncclCommSuspend ? real_ncclCommSuspend(theirs, SUSPEND_MEM) : ncclInvalidUsage;
  compare_rc("ncclCommSuspend", sa, sb, real_ncclCommSuspend != NULL);
  float *buf = NULL;
  cudaMalloc((void **)&buf, 4096);
  if (sa == ncclSuccess) {
    uint64_t flag = 0;
    if (mine_ncclCommMemStats(mine, STAT_SUSPENDED, &flag) == ncclSuccess)
      EXPECT(flag == 1, "suspended, yet MemStats(suspended) = %llu", (unsigned long long)flag);
    EXPECT(ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, mine, 0) == ncclInvalidUsage,
           "an allreduce on a suspended communicator was not refused");
    compare_rc("ncclCommResume", mine_ncclCommResume(mine),
               real_ncclCommResume ? real_ncclCommResume(theirs) : ncclInvalidUsage,
               real_ncclCommResume != NULL);
  }
  EXPECT(ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, mine, 0) == ncclSuccess &&
             cudaDeviceSynchronize() == cudaSuccess,
         "an allreduce after resume failed");
  cudaFree(buf);
  EXPECT(ncclCommDestroy(mine) == ncclSuccess, "destroy");
  real_destroy(theirs);
  printf("shim_real_api: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
