/* SPDX-License-Identifier: MIT
 * Device buffer allocation (cudaMalloc or cuMem with POSIX-fd handles) and the validation of
 * export descriptors (registration: mem_reg.c; import: ipc.c). */
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "mem.h"
#include "mem_int.h"

const char *pcl_mem_kind_name(int kind) {
  switch (kind) {
  case PCL_MEM_KIND_PROCESS:
    return "process";
  case PCL_MEM_KIND_CUDA_IPC:
    return "cuda-ipc";
  case PCL_MEM_KIND_CUMEM_FD:
    return "cumem-fd";
  default:
    return "?";
  }
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0)
      return 0;
  return 1;
}

ncclResult_t pcl_mem_desc_check(const pcl_mem_desc_t *d) {
  const char *why = NULL;
  if (d == NULL)
    why = "descriptor is NULL";
  else if (d->magic != PCL_MEM_DESC_MAGIC)
    why = "bad magic";
  else if (d->version != PCL_MEM_DESC_VERSION)
    why = "unknown version";
  else if (d->kind < PCL_MEM_KIND_PROCESS || d->kind > PCL_MEM_KIND_CUMEM_FD)
    why = "unknown kind";
  else if (d->dev < 0)
    why = "negative device";
  else if ((d->flags & ~PCL_MEM_FLAG_VMM) != 0)
    why = "unknown flags";
  else if (d->proc_token == 0)
    why = "no process token";
  else if (d->base == 0 || d->span == 0)
    why = "empty span";
  else if (d->bytes == 0)
    why = "zero bytes";
  else if (d->offset > d->span || d->bytes > d->span - d->offset)
    why = "buffer outside its span";
  else if (d->base + d->span < d->base)
    why = "span wraps around";
  else if (d->kind == PCL_MEM_KIND_CUMEM_FD &&
           (d->nchunks == 0 || d->nchunks > PCL_MEM_MAX_CHUNKS || d->fd_server == 0 ||
            d->fd_secret == 0 || !(d->flags & PCL_MEM_FLAG_VMM)))
    why = "bad cumem-fd fields";
  else if (d->kind != PCL_MEM_KIND_CUMEM_FD && (d->nchunks != 0 || d->fd_server != 0))
    why = "fd fields set on a non-fd kind";
  else if (d->kind == PCL_MEM_KIND_CUDA_IPC && all_zero(d->ipc, sizeof(d->ipc)))
    why = "empty cuda ipc handle";
  else if (d->kind != PCL_MEM_KIND_PROCESS && d->export_id == 0)
    why = "no export id";
  else if (d->reserved0 != 0 || !all_zero(d->reserved, sizeof(d->reserved)))
    why = "reserved bytes not zero";
  if (why != NULL) {
    PCL_WARN(PCL_LOG_IPC, "invalid memory export descriptor: %s", why);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* ---- allocation ------------------------------------------------------------------------------ */

static ncclResult_t zero_fill(void *ptr, size_t bytes) {
  ncclResult_t res = ncclSuccess;
  cudaStream_t s = NULL;
  /* A private non-blocking stream: never serialises with (or breaks a capture on) the legacy
   * default stream of the application. */
  PCL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PCL_CUDA_CHECK_GOTO(cudaMemsetAsync(ptr, 0, bytes, s), res, out);
  PCL_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), res, out);
out:
  cudaStreamDestroy(s);
  return res;
}

static int cumem_fd_supported(const pcl_cu_fns_t *cu, int dev) {
  CUdevice d;
  int vmm = 0, fd = 0;
  if (cu == NULL || cu->device_get(&d, dev) != CUDA_SUCCESS)
    return 0;
  if (cu->device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d) !=
      CUDA_SUCCESS)
    return 0;
  if (cu->device_get_attribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                               d) != CUDA_SUCCESS)
    return 0;
  return vmm && fd;
}

static ncclResult_t cumem_alloc(const pcl_cu_fns_t *cu, int dev, size_t bytes, pcl_mem_alloc_t *a) {
  ncclResult_t res = ncclSuccess;
  CUdevice cudev;
  CUmemAllocationProp prop;
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  size_t gran = 0, size = 0;
  int rdma = 0, ndev = 0, created = 0, reserved = 0, mapped = 0;
  CUmemAccessDesc *acc = NULL;

  PCL_CU_CHECK_GOTO(cu, device_get(&cudev, dev), res, fail);
  if (cu->device_get_attribute(&rdma, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                               cudev) != CUDA_SUCCESS)
    rdma = 0;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  /* Lets the InfiniBand transport register scratch buffers made here. */
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  PCL_CU_CHECK_GOTO(
      cu, mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), res,
      fail);
  if (gran == 0)
    gran = 2u << 20;
  size = (bytes + gran - 1) / gran * gran;
  PCL_CU_CHECK_GOTO(cu, mem_create(&h, size, &prop, 0), res, fail);
  created = 1;
  PCL_CU_CHECK_GOTO(cu, mem_address_reserve(&va, size, gran, 0, 0), res, fail);
  reserved = 1;
  PCL_CU_CHECK_GOTO(cu, mem_map(va, size, 0, h, 0), res, fail);
  mapped = 1;

  PCL_CUDA_CHECK_GOTO(cudaGetDeviceCount(&ndev), res, fail);
  acc = pcl_calloc((size_t)ndev, sizeof(*acc), "cumem access descriptors");
  PCL_PTR_CHECK_GOTO(acc, "cumem access descriptors", res, fail);
  int nacc = 0;
  for (int d = 0; d < ndev; d++) {
    int can = (d == dev);
    if (!can && cudaDeviceCanAccessPeer(&can, d, dev) != cudaSuccess)
      can = 0;
    if (!can)
      continue;
    acc[nacc].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc[nacc].location.id = d;
    acc[nacc].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    nacc++;
  }
  PCL_CU_CHECK_GOTO(cu, mem_set_access(va, size, acc, (size_t)nacc), res, fail);
  pcl_free(acc);
  acc = NULL;
  a->ptr = (void *)(uintptr_t)va;
  a->bytes = size;
  a->kind = PCL_MEM_ALLOC_CUMEM;
  a->handle = (uint64_t)h;
  return ncclSuccess;
fail:
  pcl_free(acc);
  if (mapped)
    cu->mem_unmap(va, size);
  if (reserved)
    cu->mem_address_free(va, size);
  if (created)
    cu->mem_release(h);
  return res;
}

ncclResult_t pcl_mem_alloc(int dev, size_t bytes, pcl_mem_alloc_kind_t kind,
                           pcl_mem_alloc_t **out) {
  ncclResult_t res = ncclSuccess;
  pcl_mem_alloc_t *a = NULL;
  const pcl_cu_fns_t *cu = NULL;
  int prev = -1;
  if (out == NULL || bytes == 0 || dev < 0 || kind < PCL_MEM_ALLOC_AUTO ||
      kind > PCL_MEM_ALLOC_CUMEM) {
    PCL_WARN(PCL_LOG_IPC, "pcl_mem_alloc: invalid argument (dev %d, %zu bytes, kind %d)", dev,
             bytes, (int)kind);
    return ncclInvalidArgument;
  }
  PCL_CUDA_CHECK(cudaGetDevice(&prev));
  PCL_CUDA_CHECK(cudaSetDevice(dev));
  if (kind != PCL_MEM_ALLOC_CUDA) {
    ncclResult_t lres = pcl_cu_load(&cu);
    if (kind == PCL_MEM_ALLOC_CUMEM)
      PCL_CHECK_GOTO(lres, res, out_dev);
    if (kind == PCL_MEM_ALLOC_AUTO)
      kind = cumem_fd_supported(cu, dev) ? PCL_MEM_ALLOC_CUMEM : PCL_MEM_ALLOC_CUDA;
  }
  PCL_CALLOC(a, 1, "device allocation");
  PCL_PTR_CHECK_GOTO(a, "device allocation", res, out_dev);
  a->dev = dev;
  if (kind == PCL_MEM_ALLOC_CUMEM) {
    PCL_CHECK_GOTO(cumem_alloc(cu, dev, bytes, a), res, fail_free);
  } else {
    PCL_CUDA_CHECK_GOTO(cudaMalloc(&a->ptr, bytes), res, fail_free);
    a->bytes = bytes;
    a->kind = PCL_MEM_ALLOC_CUDA;
  }
  PCL_CHECK_GOTO(zero_fill(a->ptr, a->bytes), res, fail_release);
  PCL_INFO(PCL_LOG_IPC, "allocated %zu bytes on dev %d at %p (%s)", a->bytes, dev, a->ptr,
           a->kind == PCL_MEM_ALLOC_CUMEM ? "cumem" : "cudaMalloc");
  *out = a;
  a = NULL;
  goto out_dev;
fail_release:
  pcl_mem_free(a);
  a = NULL;
fail_free:
  pcl_free(a);
out_dev:
  cudaSetDevice(prev);
  return res;
}

void pcl_mem_free(pcl_mem_alloc_t *a) {
  if (a == NULL)
    return;
  if (a->kind == PCL_MEM_ALLOC_CUMEM) {
    const pcl_cu_fns_t *cu = NULL;
    if (pcl_cu_load(&cu) == ncclSuccess) {
      CUdeviceptr va = (CUdeviceptr)(uintptr_t)a->ptr;
      CUresult r1 = cu->mem_unmap(va, a->bytes);
      CUresult r2 = cu->mem_address_free(va, a->bytes);
      CUresult r3 = cu->mem_release((CUmemGenericAllocationHandle)a->handle);
      if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS || r3 != CUDA_SUCCESS)
        PCL_WARN(PCL_LOG_IPC, "freeing cumem allocation %p: driver errors %d/%d/%d", a->ptr,
                 (int)r1, (int)r2, (int)r3);
    }
  } else if (a->ptr != NULL) {
    cudaError_t e = cudaFree(a->ptr);
    if (e != cudaSuccess)
      PCL_WARN(PCL_LOG_IPC, "cudaFree(%p) failed: %s", a->ptr, cudaGetErrorString(e));
  }
  pcl_free(a);
}
