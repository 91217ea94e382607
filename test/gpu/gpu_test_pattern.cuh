/* SPDX-License-Identifier: MIT
 * The data pattern the transport GPU tests move and check: 32-bit words i * 2654435761 + seed,
 * written by pcl_test_fill_kernel; pcl_test_pattern_byte gives byte b of it. */
#ifndef PCL_GPU_TEST_PATTERN_CUH
#define PCL_GPU_TEST_PATTERN_CUH
#include <stddef.h>
#include <stdint.h>

__global__ void pcl_test_fill_kernel(uint32_t *p, size_t n, uint32_t seed) {
  size_t nt = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += nt)
    p[i] = (uint32_t)i * 2654435761u + seed;
}

static __device__ __forceinline__ unsigned char pcl_test_pattern_byte(size_t b, uint32_t seed) {
  uint32_t w = (uint32_t)(b / 4) * 2654435761u + seed;
  return (unsigned char)(w >> (8 * (b % 4)));
}

#endif
