/* SPDX-License-Identifier: MIT
 * Import of a peer's memory export descriptor: a direct pointer inside one process (with peer
 * access or cuMemSetAccess), legacy CUDA IPC for cudaMalloc memory, or the cuMem POSIX-fd path
 * (fds fetched from the owner's fd server, mapped into a fresh VA reservation); imports of one
 * export on one device share its mapping. */
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "mem.h"
#include "mem_int.h"

/* One mapping of a peer's export on one local device, shared by every import of that export
 * there (the owner's registrations of the same memory): mapped once, unmapped with the last. */
typedef struct {
  pcl_mem_shared_t link; /* first: the list's view of it */
  uint64_t proc_token, export_id, span;
  int kind, local_dev;
  void *ipc_base;        /* CUDA_IPC: what cudaIpcOpenMemHandle returned */
  CUdeviceptr va;        /* CUMEM_FD: our reservation of span bytes */
  size_t mapped_bytes;   /* CUMEM_FD: prefix of the span mapped so far */
  uint32_t nmapped;      /* CUMEM_FD: chunks mapped, each unmapped on its own at close */
  uint64_t (*chunks)[2]; /* CUMEM_FD: {offset, bytes} of each mapped chunk */
} mem_mapping_t;

struct pcl_mem_import {
  void *ptr;
  int kind;           /* PCL_MEM_KIND_PROCESS (direct pointer), CUDA_IPC or CUMEM_FD */
  mem_mapping_t *map; /* NULL for a direct pointer */
};

static pcl_mem_shared_list_t g_mappings = PCL_MEM_SHARED_LIST_INIT;

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
                                    mem_mapping_t *m) {
  ncclResult_t res = ncclSuccess;
  m->chunks = pcl_calloc(d->nchunks, sizeof(*m->chunks), "imported cumem chunks");
  if (m->chunks == NULL)
    return ncclSystemError;
  for (uint32_t i = 0; i < d->nchunks; i++) {
    int fd = -1;
    uint64_t off = 0, bytes = 0;
    CUmemGenericAllocationHandle h;
    PCL_CHECK(pcl_ipc_fd_fetch(d->fd_server, d->fd_secret, i, &fd, &off, &bytes));
    /* Chunks arrive in order and tile the span exactly. */
    if (off != m->mapped_bytes || bytes == 0 || bytes > d->span - off) {
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
      r = cu->mem_address_reserve(&m->va, d->span, gran, 0, 0);
      if (r != CUDA_SUCCESS) {
        cu->mem_release(h);
        return pcl_cu_fail("cuMemAddressReserve (import)", r);
      }
    }
    r = cu->mem_map(m->va + off, bytes, 0, h, 0);
    /* The mapping holds its own reference: drop the import's now, mapped or not. */
    cu->mem_release(h);
    if (r != CUDA_SUCCESS)
      return pcl_cu_fail("cuMemMap (import)", r);
    m->chunks[m->nmapped][0] = off;
    m->chunks[m->nmapped][1] = bytes;
    m->nmapped++;
    m->mapped_bytes = off + bytes;
  }
  if (m->mapped_bytes != d->span) {
    PCL_WARN(PCL_LOG_IPC, "peer's cumem chunks cover %zu of %llu bytes", m->mapped_bytes,
             (unsigned long long)d->span);
    return ncclSystemError;
  }
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = local_dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = cu->mem_set_access(m->va, d->span, &acc, 1);
  if (r != CUDA_SUCCESS)
    res = pcl_cu_fail("cuMemSetAccess (import)", r);
  return res;
}

/* Unmaps and frees a mapping nobody uses (or a half-made one). */
static void mapping_free(mem_mapping_t *m) {
  if (m == NULL)
    return;
  if (m->kind == PCL_MEM_KIND_CUDA_IPC && m->ipc_base != NULL) {
    cudaError_t e = cudaIpcCloseMemHandle(m->ipc_base);
    if (e != cudaSuccess)
      PCL_WARN(PCL_LOG_IPC, "cudaIpcCloseMemHandle(%p) failed: %s", m->ipc_base,
               cudaGetErrorString(e));
  } else if (m->kind == PCL_MEM_KIND_CUMEM_FD && m->va != 0) {
    const pcl_cu_fns_t *cu = NULL;
    if (pcl_cu_load(&cu) == ncclSuccess) {
      CUresult r1 = CUDA_SUCCESS;
      for (uint32_t i = 0; i < m->nmapped; i++) {
        CUresult r = cu->mem_unmap(m->va + m->chunks[i][0], m->chunks[i][1]);
        if (r != CUDA_SUCCESS)
          r1 = r;
      }
      CUresult r2 = cu->mem_address_free(m->va, m->span);
      if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
        PCL_WARN(PCL_LOG_IPC, "unmapping imported cumem at %p: driver errors %d/%d",
                 (void *)(uintptr_t)m->va, (int)r1, (int)r2);
    }
  }
  pcl_free(m->chunks);
  pcl_free(m);
}

typedef struct {
  const pcl_mem_desc_t *d;
  int local_dev;
} mapping_key_t;

static int mapping_match(const pcl_mem_shared_t *o, const void *key) {
  const mem_mapping_t *m = (const mem_mapping_t *)o;
  const mapping_key_t *k = key;
  return m->export_id == k->d->export_id && m->proc_token == k->d->proc_token &&
         m->kind == k->d->kind && m->local_dev == k->local_dev && m->span == k->d->span;
}

/* The live mapping of d's export on local_dev, with a reference taken, or NULL. An export id
 * names one export of one span (mem_reg.c): a remapped span arrives under a new id. */
static mem_mapping_t *mapping_find(const pcl_mem_desc_t *d, int local_dev) {
  mapping_key_t k = {d, local_dev};
  return (mem_mapping_t *)pcl_mem_shared_find(&g_mappings, mapping_match, &k);
}

/* Maps d's export on local_dev anew and lists the mapping. */
static ncclResult_t mapping_new(const pcl_cu_fns_t *cu, const pcl_mem_desc_t *d, int local_dev,
                                mem_mapping_t **out) {
  ncclResult_t res = ncclSuccess;
  mem_mapping_t *m = NULL;
  PCL_CALLOC(m, 1, "memory mapping");
  if (m == NULL)
    return ncclSystemError;
  m->proc_token = d->proc_token;
  m->export_id = d->export_id;
  m->span = d->span;
  m->kind = d->kind;
  m->local_dev = local_dev;
  if (d->kind == PCL_MEM_KIND_CUDA_IPC) {
    cudaIpcMemHandle_t ih;
    memcpy(&ih, d->ipc, sizeof(ih));
    PCL_CUDA_CHECK_GOTO(cudaIpcOpenMemHandle(&m->ipc_base, ih, cudaIpcMemLazyEnablePeerAccess), res,
                        fail);
  } else {
    PCL_CHECK_GOTO(import_cumem_fd(cu, d, local_dev, m), res, fail);
  }
  pcl_mem_shared_add(&g_mappings, &m->link);
  *out = m;
  return ncclSuccess;
fail:
  mapping_free(m);
  return res;
}

static void mapping_put(mem_mapping_t *m) {
  if (m != NULL && pcl_mem_shared_put(&g_mappings, &m->link))
    mapping_free(m);
}

int pcl_mem_mappings_live(void) {
  return pcl_mem_shared_count(&g_mappings);
}

ncclResult_t pcl_mem_import(const pcl_mem_desc_t *desc, int local_dev, pcl_mem_import_t **out) {
  ncclResult_t res = ncclSuccess;
  const pcl_cu_fns_t *cu = NULL;
  pcl_mem_import_t *imp = NULL;
  int prev = -1, shared = 0;
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
  } else if (desc->kind == PCL_MEM_KIND_CUDA_IPC || desc->kind == PCL_MEM_KIND_CUMEM_FD) {
    imp->map = mapping_find(desc, local_dev);
    shared = imp->map != NULL;
    if (imp->map == NULL)
      PCL_CHECK_GOTO(mapping_new(cu, desc, local_dev, &imp->map), res, fail);
    imp->kind = desc->kind;
    imp->ptr = desc->kind == PCL_MEM_KIND_CUDA_IPC
                   ? (char *)imp->map->ipc_base + desc->offset
                   : (void *)(uintptr_t)(imp->map->va + desc->offset);
  } else {
    PCL_WARN(PCL_LOG_IPC,
             "peer memory on dev %d is of a kind that only its own process can use (allocate it "
             "with cudaMalloc, or cuMem with POSIX-fd handles such as ncclMemAlloc)",
             desc->dev);
    res = ncclInvalidUsage;
    goto fail;
  }
  PCL_INFO(PCL_LOG_IPC, "imported %s memory of dev %d (+%llu bytes) at %p on dev %d%s",
           pcl_mem_kind_name(desc->kind), desc->dev, (unsigned long long)desc->bytes, imp->ptr,
           local_dev, shared ? " (its export was mapped already)" : "");
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
  mapping_put(imp->map);
  pcl_free(imp);
}
