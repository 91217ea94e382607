/* SPDX-License-Identifier: MIT
 * The launch floors planccl-bench times beside a library's host path (bench/empty_kernel.cu):
 * an empty kernel and an interpreter-shaped one (planccl's kernel parameter block and dynamic
 * shared memory, empty body), each launched through the runtime and through the driver. */
#ifndef PCL_BENCH_LAUNCH_H
#define PCL_BENCH_LAUNCH_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PCL_BENCH_EMPTY_RT,        /* empty kernel, cudaLaunchKernel */
  PCL_BENCH_EMPTY_CU_FUNC,   /* empty kernel, cuLaunchKernel with its CUfunction */
  PCL_BENCH_EMPTY_CU_KERNEL, /* empty kernel, cuLaunchKernel with its CUkernel */
  PCL_BENCH_ABI_RT,          /* interpreter-shaped kernel, cudaLaunchKernel */
  PCL_BENCH_ABI_CU_KERNEL,   /* interpreter-shaped kernel, cuLaunchKernel with its CUkernel
                                (what planccl's executor does) */
  PCL_BENCH_LAUNCH_COUNT
} pcl_bench_launch_t;

/* Per thread (CUfunction handles belong to the current device's context). */
typedef struct {
  void *cu_launch;                  /* cuLaunchKernel; NULL: driver variants unavailable */
  void *fn[PCL_BENCH_LAUNCH_COUNT]; /* CUfunction / CUkernel per variant, NULL for runtime */
} pcl_bench_launcher_t;

/* Resolves the driver entry point and the handles on the current device. Returns 0, or -1 when
 * the driver variants are unavailable (the runtime variants still work). */
int pcl_bench_launcher_init(pcl_bench_launcher_t *l);

/* 1 when variant `v` can be launched with `l`. */
int pcl_bench_launch_available(const pcl_bench_launcher_t *l, int v);

/* One launch of variant `v` (1 block of 32 threads) on `stream`; 0 or a nonzero error code. */
int pcl_bench_launch(const pcl_bench_launcher_t *l, int v, cudaStream_t stream);

/* A short description of variant `v` for the report. */
const char *pcl_bench_launch_name(int v);

/* The interpreter's kernel parameter bytes (sizeof(pcl_kargs_t)) and dynamic shared memory
 * bytes (sizeof(pcl_kblock_t)), which the interpreter-shaped variants copy. */
unsigned pcl_bench_abi_param_bytes(void);
unsigned pcl_bench_abi_smem_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
