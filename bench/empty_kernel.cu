/* SPDX-License-Identifier: MIT
 * An empty kernel and its C launcher: planccl-bench times one bare kernel launch as the floor
 * under any library's host path (a collective that runs a kernel cannot return sooner). */
#include <cuda_runtime_api.h>

__global__ void pcl_bench_empty_kernel(void) {}

extern "C" cudaError_t pcl_bench_launch_empty(cudaStream_t stream) {
  pcl_bench_empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}
