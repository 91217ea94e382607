/* SPDX-License-Identifier: MIT
 * Element reductions for every dtype x op: sum, prod, min, max, avg (avg = sum on the way, then
 * the final step scales: floats multiply by 1/n, integers divide by n, as NCCL's SumPostDiv).
 * Integer sums and products wrap (computed unsigned); fp16/bf16/fp8 compute in float and round
 * to nearest on every step, as the CPU simulator does. Templates only instantiate. */
#ifndef PCL_REDUCE_CUH
#define PCL_REDUCE_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <nccl.h>

/* Compute type, widening and narrowing per storage type. */
template <typename T> struct pcl_kty {
  typedef T acc;
  static __device__ __forceinline__ acc up(T x) {
    return x;
  }
  static __device__ __forceinline__ T down(acc x) {
    return x;
  }
};
template <> struct pcl_kty<__half> {
  typedef float acc;
  static __device__ __forceinline__ float up(__half x) {
    return __half2float(x);
  }
  static __device__ __forceinline__ __half down(float x) {
    return __float2half_rn(x);
  }
};
template <> struct pcl_kty<__nv_bfloat16> {
  typedef float acc;
  static __device__ __forceinline__ float up(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static __device__ __forceinline__ __nv_bfloat16 down(float x) {
    return __float2bfloat16_rn(x);
  }
};
template <> struct pcl_kty<__nv_fp8_e4m3> {
  typedef float acc;
  static __device__ __forceinline__ float up(__nv_fp8_e4m3 x) {
    return (float)x;
  }
  static __device__ __forceinline__ __nv_fp8_e4m3 down(float x) {
    return __nv_fp8_e4m3(x);
  }
};
template <> struct pcl_kty<__nv_fp8_e5m2> {
  typedef float acc;
  static __device__ __forceinline__ float up(__nv_fp8_e5m2 x) {
    return (float)x;
  }
  static __device__ __forceinline__ __nv_fp8_e5m2 down(float x) {
    return __nv_fp8_e5m2(x);
  }
};

/* Wrapping add/mul: unsigned arithmetic for integers (signed overflow is undefined in C++). */
template <typename A> __device__ __forceinline__ A pcl_kadd(A a, A b) {
  return a + b;
}
template <typename A> __device__ __forceinline__ A pcl_kmul(A a, A b) {
  return a * b;
}
#define PCL_KWRAP_(S, U)                                                                           \
  template <> __device__ __forceinline__ S pcl_kadd<S>(S a, S b) {                                 \
    return (S)((U)a + (U)b);                                                                       \
  }                                                                                                \
  template <> __device__ __forceinline__ S pcl_kmul<S>(S a, S b) {                                 \
    return (S)((U)a * (U)b);                                                                       \
  }
PCL_KWRAP_(int8_t, uint32_t)
PCL_KWRAP_(uint8_t, uint32_t)
PCL_KWRAP_(int32_t, uint32_t)
PCL_KWRAP_(uint32_t, uint32_t)
PCL_KWRAP_(int64_t, uint64_t)
PCL_KWRAP_(uint64_t, uint64_t)
#undef PCL_KWRAP_

/* One reduction step in storage type T. OP is an ncclRedOp_t value; avg sums here. */
template <typename T, int OP> __device__ __forceinline__ T pcl_kred(T a, T b) {
  typedef pcl_kty<T> K;
  typename K::acc x = K::up(a), y = K::up(b), r;
  if (OP == ncclSum || OP == ncclAvg)
    r = pcl_kadd(x, y);
  else if (OP == ncclProd)
    r = pcl_kmul(x, y);
  else if (OP == ncclMax)
    r = x < y ? y : x;
  else
    r = y < x ? y : x;
  return K::down(r);
}

/* The final step of avg: floats multiply by 1/n (in their compute type), integers divide. */
template <typename T> __device__ __forceinline__ T pcl_kavg_final(T a, uint32_t n) {
  typedef pcl_kty<T> K;
  typename K::acc x = K::up(a);
  return K::down(x * ((typename K::acc)1 / (typename K::acc)n));
}
#define PCL_KAVG_INT_(S)                                                                           \
  template <> __device__ __forceinline__ S pcl_kavg_final<S>(S a, uint32_t n) {                    \
    return (S)(a / (S)n);                                                                          \
  }
PCL_KAVG_INT_(int8_t)
PCL_KAVG_INT_(uint8_t)
PCL_KAVG_INT_(int32_t)
PCL_KAVG_INT_(uint32_t)
PCL_KAVG_INT_(int64_t)
PCL_KAVG_INT_(uint64_t)
#undef PCL_KAVG_INT_

/* Lane-wise over a word W (uint4, uint2, uint32_t) holding sizeof(W)/sizeof(T) elements (a word
 * smaller than T is never reduced: the host refuses that pairing; N = 1 keeps it compiling). */
template <typename T, typename W> struct pcl_klanes {
  enum { N = sizeof(W) >= sizeof(T) ? sizeof(W) / sizeof(T) : 1 };
  union U {
    W w;
    T e[N];
    __device__ U() {}
  };
};

template <typename T, int OP, typename W> __device__ __forceinline__ W pcl_kred_w(W a, W b) {
  typename pcl_klanes<T, W>::U x, y;
  x.w = a;
  y.w = b;
#pragma unroll
  for (int i = 0; i < (int)pcl_klanes<T, W>::N; i++)
    x.e[i] = pcl_kred<T, OP>(x.e[i], y.e[i]);
  return x.w;
}

template <typename T, typename W> __device__ __forceinline__ W pcl_kavg_w(W a, uint32_t n) {
  typename pcl_klanes<T, W>::U x;
  x.w = a;
#pragma unroll
  for (int i = 0; i < (int)pcl_klanes<T, W>::N; i++)
    x.e[i] = pcl_kavg_final<T>(x.e[i], n);
  return x.w;
}

#endif
