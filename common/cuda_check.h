/* SPDX-License-Identifier: MIT
 * CUDA runtime check macros; kept apart from pcl_check.h so modules without CUDA (the plan loader,
 * the simulator, the tools) do not depend on the CUDA headers. */
#ifndef PCL_CUDA_CHECK_H
#define PCL_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include "pcl_check.h"

#define PCL_CUDA_CHECK(call)                                                                       \
  do {                                                                                             \
    cudaError_t pcl_err_ = (call);                                                                 \
    if (pcl_err_ != cudaSuccess) {                                                                 \
      PCL_WARN(PCL_LOG_ALL, "cuda failure '%s' in %s", cudaGetErrorString(pcl_err_), #call);       \
      return ncclUnhandledCudaError;                                                               \
    }                                                                                              \
  } while (0)

#define PCL_CUDA_CHECK_GOTO(call, res, label)                                                      \
  do {                                                                                             \
    cudaError_t pcl_err_ = (call);                                                                 \
    if (pcl_err_ != cudaSuccess) {                                                                 \
      PCL_WARN(PCL_LOG_ALL, "cuda failure '%s' in %s", cudaGetErrorString(pcl_err_), #call);       \
      (res) = ncclUnhandledCudaError;                                                              \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

#endif
