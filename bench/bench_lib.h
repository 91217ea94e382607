/* SPDX-License-Identifier: MIT
 * One NCCL-compatible library as planccl-bench sees it: opened with dlopen (its own symbols
 * first, so two NCCLs can sit in one process) and called through the NCCL API it exports. */
#ifndef PCL_BENCH_LIB_H
#define PCL_BENCH_LIB_H

#include <nccl.h>
#include <stddef.h>

typedef struct {
  void *handle;
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*init_all)(ncclComm_t *, int, const int *); /* NULL: no single-thread model */
  ncclResult_t (*destroy)(ncclComm_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  const char *(*error_string)(ncclResult_t);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                         cudaStream_t);
  ncclResult_t (*alltoall)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                           cudaStream_t); /* NULL: before NCCL 2.28; all-to-all is skipped */
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  /* Symmetric windows (NCCL 2.27+); all NULL unless asked for. */
  ncclResult_t (*mem_alloc)(void **, size_t);
  ncclResult_t (*mem_free)(void *);
  ncclResult_t (*win_register)(ncclComm_t, void *, size_t, ncclWindow_t *, int);
  ncclResult_t (*win_deregister)(ncclComm_t, ncclWindow_t);
} bench_lib_t;

/* Opens `path` and resolves the API (the window calls too when `symm`). Returns 0, or -1 with
 * one line naming the library and what is missing in `err`. */
int bench_lib_open(bench_lib_t *l, const char *path, int symm, char *err, size_t errlen);
void bench_lib_close(bench_lib_t *l);

#endif
