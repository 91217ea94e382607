/* SPDX-License-Identifier: MIT
 * Check macros shared by the GPU test programs: in a function returning int with a local `rank`,
 * a failed call prints the rank, the call, the error and the line, and returns 1. */
#ifndef PCL_GPU_TEST_CHECK_H
#define PCL_GPU_TEST_CHECK_H

#include <stdio.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "rank %d: ", rank);                                                            \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, " (line %d)\n", __LINE__);                                                     \
    return 1;                                                                                      \
  } while (0)
#define CK(call)                                                                                   \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess)                                                                         \
      FAIL("%s -> %d", #call, (int)r_);                                                            \
  } while (0)
#define CUCK(call)                                                                                 \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess)                                                                         \
      FAIL("%s -> %s", #call, cudaGetErrorString(e_));                                             \
  } while (0)

#endif
