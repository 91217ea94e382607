/* SPDX-License-Identifier: MIT
 * Launch floors for planccl-bench: the host cost of one bare kernel launch is the floor under any
 * library's host path (a collective that runs a kernel cannot return sooner). An empty kernel
 * and one shaped like planccl's interpreter, launched through the runtime and the driver. */
#include <stddef.h>
#include <cuda.h> /* driver types only: cuLaunchKernel is a driver entry point we resolve */
#include <cuda_runtime_api.h>
#include "bench_launch.h"
#include "kernel_abi.h"

__global__ void pcl_bench_empty_kernel(void) {}

/* planccl's interpreter (kernels/exec_kernel.cu) takes one pcl_kargs_t by value and
 * sizeof(pcl_kblock_t) bytes of dynamic shared memory; this kernel has both and does nothing. */
__global__ void pcl_bench_abi_kernel(pcl_kargs_t a) {}

typedef CUresult (*cu_launch_fn_t)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned smem, CUstream stream,
                                   void **params, void **extra);

static int is_abi(int v) {
  return v == PCL_BENCH_ABI_RT || v == PCL_BENCH_ABI_CU_KERNEL;
}

static const void *host_fn(int v) {
  return is_abi(v) ? (const void *)pcl_bench_abi_kernel : (const void *)pcl_bench_empty_kernel;
}

static unsigned smem_of(int v) {
  return is_abi(v) ? (unsigned)sizeof(pcl_kblock_t) : 0u;
}

extern "C" int pcl_bench_launcher_init(pcl_bench_launcher_t *l) {
  *l = pcl_bench_launcher_t{};
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess || fn == NULL) {
    (void)cudaGetLastError();
    return -1;
  }
  cudaFunction_t f = NULL;
  cudaKernel_t k_empty = NULL, k_abi = NULL;
  if (cudaGetFuncBySymbol(&f, (const void *)pcl_bench_empty_kernel) != cudaSuccess ||
      cudaGetKernel(&k_empty, (const void *)pcl_bench_empty_kernel) != cudaSuccess ||
      cudaGetKernel(&k_abi, (const void *)pcl_bench_abi_kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  l->fn[PCL_BENCH_EMPTY_CU_FUNC] = (void *)f;
  l->fn[PCL_BENCH_EMPTY_CU_KERNEL] = (void *)k_empty;
  l->fn[PCL_BENCH_ABI_CU_KERNEL] = (void *)k_abi;
  l->cu_launch = fn;
  return 0;
}

static int is_driver(int v) {
  return v == PCL_BENCH_EMPTY_CU_FUNC || v == PCL_BENCH_EMPTY_CU_KERNEL ||
         v == PCL_BENCH_ABI_CU_KERNEL;
}

extern "C" int pcl_bench_launch_available(const pcl_bench_launcher_t *l, int v) {
  return !is_driver(v) || (l->cu_launch != NULL && l->fn[v] != NULL);
}

extern "C" int pcl_bench_launch(const pcl_bench_launcher_t *l, int v, cudaStream_t stream) {
  pcl_kargs_t args = {};
  void *abi_params[1] = {&args};
  void **params = is_abi(v) ? abi_params : NULL;
  if (is_driver(v))
    return (int)((cu_launch_fn_t)l->cu_launch)((CUfunction)l->fn[v], 1, 1, 1, 32, 1, 1, smem_of(v),
                                               (CUstream)stream, params, NULL);
  return (int)cudaLaunchKernel(host_fn(v), dim3(1), dim3(32), params, smem_of(v), stream);
}

extern "C" const char *pcl_bench_launch_name(int v) {
  switch (v) {
  case PCL_BENCH_EMPTY_RT:
    return "empty kernel, cudaLaunchKernel";
  case PCL_BENCH_EMPTY_CU_FUNC:
    return "empty kernel, cuLaunchKernel(CUfunction)";
  case PCL_BENCH_EMPTY_CU_KERNEL:
    return "empty kernel, cuLaunchKernel(CUkernel)";
  case PCL_BENCH_ABI_RT:
    return "interpreter-shaped kernel, cudaLaunchKernel";
  case PCL_BENCH_ABI_CU_KERNEL:
    return "interpreter-shaped kernel, cuLaunchKernel(CUkernel)";
  default:
    return "?";
  }
}

extern "C" unsigned pcl_bench_abi_param_bytes(void) {
  return (unsigned)sizeof(pcl_kargs_t);
}

extern "C" unsigned pcl_bench_abi_smem_bytes(void) {
  return (unsigned)sizeof(pcl_kblock_t);
}
