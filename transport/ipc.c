/* SPDX-License-Identifier: MIT
 * Import of a peer's memory export descriptor: a direct pointer inside one process (with peer
 * access or cuMemSetAccess), legacy CUDA IPC for cudaMalloc memory, or the cuMem POSIX-fd path
 * (fds fetched from the owner's fd server, mapped into a fresh VA reservation). */
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "mem.h"
#include "mem_int.h"

struct pcl_mem_import {
  void *ptr;
  int kind;       /* PCL_MEM_KIND_PROCESS (direct pointer), CUDA_IPC or CUMEM_FD */
  void *ipc_base; /* CUDA_IPC: what cudaIpcOpenMemHandle returned */
  CUdeviceptr va; /* CUMEM_FD: our reservation of desc->span bytes */
  size_t span;
  size_t mapped_bytes;   /* CUMEM_FD: prefix of the span mapped so far */
  uint32_t nmapped;      /* CUMEM_FD: chunks mapped, each unmapped on its own at close */
  uint64_t (*chunks)[2]; /* CUMEM_FD: {offset, bytes} of each mapped chunk */
};

/* Same address space: the owner's pointer works once the local device may access the owner's. */
static ncclResult_t import_same_process(const pcl_cu_fns_t *cu, const pcl_mem_desc_t *d,
                                        int local_dev) {
  if (d->dev == local_dev)
    return ncclSuccess;
  int can = 0;
  PCL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, local_dev, d->dev));
  if (!can) {
    PCL_WARN(PCL_LOG_IPC, "device %d cannot access device %d as a peer", local_dev, d->dev);
    return ncclSystemError;
  }
  if (d->flags & PCL_MEM_FLAG_VMM) {
    /* VMM memory ignores cudaDeviceEnablePeerAccess: access is per mapping. Setting it again for
     * a device that already has it is harmless. */
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = local_dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult r = cu->mem_set_access((CUdeviceptr)d->base, d->span, &acc, 1);
    if (r != CUDA_SUCCESS)
      return pcl_cu_fail("cuMemSetAccess", r);
    return ncclSuccess;
  }
  cudaError_t e = cudaDeviceEnablePeerAccess(d->dev, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError(); /* clear it: "already enabled" is what we wanted */
  } else if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_IPC, "cudaDeviceEnablePeerAccess(%d) from device %d failed: %s", d->dev,
             local_dev, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

static ncclResult_t import_cumem_fd(const pcl_cu_fns_t *cu, const pcl_mem_desc_t *d, int local_dev,
                                    pcl_mem_import_t *imp) {
  ncclResult_t res = ncclSuccess;
  imp->chunks = pcl_calloc(d->nchunks, sizeof(*imp->chunks), "imported cumem chunks");
  if (imp->chunks == NULL)
    return ncclSystemError;
  for (uint32_t i = 0; i < d->nchunks; i++) {
    int fd = -1;
    uint64_t off = 0, bytes = 0;
    CUmemGenericAllocationHandle h;
    PCL_CHECK(pcl_ipc_fd_fetch(d->fd_server, d->fd_secret, i, &fd, &off, &bytes));
    /* Chunks arrive in order and tile the span exactly. */
    if (off != imp->mapped_bytes || bytes == 0 || bytes > d->span - off) {
      PCL_WARN(PCL_LOG_IPC,
               "cumem chunk %u of the peer's span is out of place (off %llu, %llu "
               "bytes, span %llu)",
               i, (unsigned long long)off, (unsigned long long)bytes, (unsigned long long)d->span);
      close(fd);
      return ncclSystemError;
    }
    CUresult r = cu->mem_import_from_shareable_handle(&h, (void *)(uintptr_t)fd,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd); /* the handle keeps the allocation; the fd is no longer needed */
    if (r != CUDA_SUCCESS)
      return pcl_cu_fail("cuMemImportFromShareableHandle", r);
    if (i == 0) {
      /* Align the reservation to the local device's granularity (the owner's device ordinal in
       * the handle's properties means nothing in this process); 0 = the driver's default. */
      CUmemAllocationProp prop;
      size_t gran = 0;
      memset(&prop, 0, sizeof(prop));
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = local_dev;
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      if (cu->mem_get_allocation_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
          CUDA_SUCCESS)
        gran = 0;
      r = cu->mem_address_reserve(&imp->va, d->span, gran, 0, 0);
      if (r != CUDA_SUCCESS) {
        cu->mem_release(h);
        return pcl_cu_fail("cuMemAddressReserve (import)", r);
      }
      imp->span = d->span;
    }
    r = cu->mem_map(imp->va + off, bytes, 0, h, 0);
    /* The mapping holds its own reference: drop the import's now, mapped or not. */
    cu->mem_release(h);
    if (r != CUDA_SUCCESS)
      return pcl_cu_fail("cuMemMap (import)", r);
    imp->chunks[imp->nmapped][0] = off;
    imp->chunks[imp->nmapped][1] = bytes;
    imp->nmapped++;
    imp->mapped_bytes = off + bytes;
  }
  if (imp->mapped_bytes != d->span) {
    PCL_WARN(PCL_LOG_IPC, "peer's cumem chunks cover %zu of %llu bytes", imp->mapped_bytes,
             (unsigned long long)d->span);
    return ncclSystemError;
  }
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = local_dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = cu->mem_set_access(imp->va, d->span, &acc, 1);
  if (r != CUDA_SUCCESS)
    res = pcl_cu_fail("cuMemSetAccess (import)", r);
  return res;
}

ncclResult_t pcl_mem_import(const pcl_mem_desc_t *desc, int local_dev, pcl_mem_import_t **out) {
  ncclResult_t res = ncclSuccess;
  const pcl_cu_fns_t *cu = NULL;
  pcl_mem_import_t *imp = NULL;
  int prev = -1;
  if (out == NULL || local_dev < 0) {
    PCL_WARN(PCL_LOG_IPC, "pcl_mem_import: invalid argument (dev %d)", local_dev);
    return ncclInvalidArgument;
  }
  PCL_CHECK(pcl_mem_desc_check(desc));
  PCL_CHECK(pcl_cu_load(&cu));
  PCL_CUDA_CHECK(cudaGetDevice(&prev));
  PCL_CUDA_CHECK(cudaSetDevice(local_dev));
  PCL_CALLOC(imp, 1, "memory import");
  PCL_PTR_CHECK_GOTO(imp, "memory import", res, fail);

  if (desc->proc_token == pcl_mem_proc_token()) {
    PCL_CHECK_GOTO(import_same_process(cu, desc, local_dev), res, fail);
    imp->kind = PCL_MEM_KIND_PROCESS;
    imp->ptr = (void *)(uintptr_t)(desc->base + desc->offset);
  } else if (desc->kind == PCL_MEM_KIND_CUDA_IPC) {
    cudaIpcMemHandle_t ih;
    memcpy(&ih, desc->ipc, sizeof(ih));
    PCL_CUDA_CHECK_GOTO(cudaIpcOpenMemHandle(&imp->ipc_base, ih, cudaIpcMemLazyEnablePeerAccess),
                        res, fail);
    imp->kind = PCL_MEM_KIND_CUDA_IPC;
    imp->ptr = (char *)imp->ipc_base + desc->offset;
  } else if (desc->kind == PCL_MEM_KIND_CUMEM_FD) {
    imp->kind = PCL_MEM_KIND_CUMEM_FD;
    PCL_CHECK_GOTO(import_cumem_fd(cu, desc, local_dev, imp), res, fail);
    imp->ptr = (void *)(uintptr_t)(imp->va + desc->offset);
  } else {
    PCL_WARN(PCL_LOG_IPC,
             "peer memory on dev %d is of a kind that only its own process can use (allocate it "
             "with cudaMalloc, or cuMem with POSIX-fd handles such as ncclMemAlloc)",
             desc->dev);
    res = ncclInvalidUsage;
    goto fail;
  }
  PCL_INFO(PCL_LOG_IPC, "imported %s memory of dev %d (+%llu bytes) at %p on dev %d",
           pcl_mem_kind_name(desc->kind), desc->dev, (unsigned long long)desc->bytes, imp->ptr,
           local_dev);
  *out = imp;
  cudaSetDevice(prev);
  return ncclSuccess;
fail:
  pcl_mem_import_close(imp);
  cudaSetDevice(prev);
  return res;
}

void *pcl_mem_import_ptr(const pcl_mem_import_t *imp) {
  return imp->ptr;
}
int pcl_mem_import_kind(const pcl_mem_import_t *imp) {
  return imp->kind;
}

void pcl_mem_import_close(pcl_mem_import_t *imp) {
  if (imp == NULL)
    return;
  if (imp->kind == PCL_MEM_KIND_CUDA_IPC && imp->ipc_base != NULL) {
    cudaError_t e = cudaIpcCloseMemHandle(imp->ipc_base);
    if (e != cudaSuccess)
      PCL_WARN(PCL_LOG_IPC, "cudaIpcCloseMemHandle(%p) failed: %s", imp->ipc_base,
               cudaGetErrorString(e));
  } else if (imp->kind == PCL_MEM_KIND_CUMEM_FD && imp->va != 0) {
    const pcl_cu_fns_t *cu = NULL;
    if (pcl_cu_load(&cu) == ncclSuccess) {
      CUresult r1 = CUDA_SUCCESS;
      for (uint32_t i = 0; i < imp->nmapped; i++) {
        CUresult r = cu->mem_unmap(imp->va + imp->chunks[i][0], imp->chunks[i][1]);
        if (r != CUDA_SUCCESS)
          r1 = r;
      }
      CUresult r2 = cu->mem_address_free(imp->va, imp->span);
      if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
        PCL_WARN(PCL_LOG_IPC, "unmapping imported cumem at %p: driver errors %d/%d",
                 (void *)(uintptr_t)imp->va, (int)r1, (int)r2);
    }
  }
  pcl_free(imp->chunks);
  pcl_free(imp);
}
