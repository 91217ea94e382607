/* SPDX-License-Identifier: MIT
 * A record (session 13, device call 1), not built: buffer ids across free/realloc and cuMem
 * remaps, address ranges of a span of several mappings, the cost of the queries. */
#include <stdio.h>
#include <time.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_) {                                                                                      \
      const char *s;                                                                               \
      cuGetErrorString(r_, &s);                                                                    \
      printf("FAIL %s: %s\n", #x, s);                                                              \
    }                                                                                              \
  } while (0)
static unsigned long long bid(void *p) {
  unsigned long long id = 0;
  CK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)p));
  return id;
}
int main(void) {
  cudaSetDevice(0);
  cudaFree(0);
  void *a, *b;
  cudaMalloc(&a, 1 << 20);
  printf("cudaMalloc a=%p id=%llu\n", a, bid(a));
  printf("id at a+4096: %llu\n", bid((char *)a + 4096));
  cudaFree(a);
  cudaMalloc(&b, 1 << 20);
  printf("after free+malloc b=%p id=%llu (same addr %d)\n", b, bid(b), a == b);
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t g = 0;
  CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  printf("gran %zu\n", g);
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
  CUmemGenericAllocationHandle h1, h2, h3;
  CK(cuMemCreate(&h1, g, &prop, 0));
  CK(cuMemCreate(&h2, g, &prop, 0));
  CK(cuMemCreate(&h3, g, &prop, 0));
  CK(cuMemMap(va, g, 0, h1, 0));
  CK(cuMemMap(va + g, g, 0, h2, 0));
  CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CK(cuMemSetAccess(va, 2 * g, &ad, 1));
  CUdeviceptr rb;
  size_t rs;
  CK(cuMemGetAddressRange(&rb, &rs, va + g - 8));
  printf("range at va+g-8: +%llu %zu\n", (unsigned long long)(rb - va), rs);
  CK(cuMemGetAddressRange(&rb, &rs, va + g + 8));
  printf("range at va+g+8: +%llu %zu\n", (unsigned long long)(rb - va), rs);
  unsigned long long i1 = bid((void *)va), i2 = bid((void *)(va + g));
  printf("cumem ids chunk0 %llu chunk1 %llu\n", i1, i2);
  CK(cuMemUnmap(va + g, g));
  CK(cuMemMap(va + g, g, 0, h3, 0));
  CK(cuMemSetAccess(va + g, g, &ad, 1));
  printf("after remap chunk1 id %llu (was %llu)\n", bid((void *)(va + g)), i2);
  CK(cuMemUnmap(va + g, g));
  CK(cuMemMap(va + g, g, 0, h2, 0));
  CK(cuMemSetAccess(va + g, g, &ad, 1));
  printf("after remap of the same handle chunk1 id %llu\n", bid((void *)(va + g)));
  unsigned long long ht = 0;
  CK(cuPointerGetAttribute(&ht, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, va));
  printf("allowed handle types %llx\n", ht);
  int legacy = -1;
  CK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va));
  printf("cumem legacy %d\n", legacy);
  legacy = -1;
  CK(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                           (CUdeviceptr)b));
  printf("cudaMalloc legacy %d\n", legacy);
  /* timing of the queries */
  cudaEvent_t e;
  (void)e;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 10000; i++) {
    bid(b);
    CK(cuMemGetAddressRange(&rb, &rs, (CUdeviceptr)b));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("buffer id + address range: %.3f us per pair\n",
         ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e4 / 1e3);
  CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_BUFFER_ID,
                               CU_POINTER_ATTRIBUTE_RANGE_START_ADDR};
  unsigned long long v0;
  CUdeviceptr v1;
  void *vals[2] = {&v0, &v1};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 10000; i++)
    CK(cuPointerGetAttributes(2, at, vals, (CUdeviceptr)b));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("cuPointerGetAttributes(id, range start): %.3f us\n",
         ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e4 / 1e3);
  return 0;
}
