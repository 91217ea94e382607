/* SPDX-License-Identifier: MIT
 * Registration of device buffers for peers: a buffer's kind from the driver's pointer attributes,
 * and its export (a CUDA IPC handle, or cuMem fds at this process's fd server) shared by every
 * registration whose span is the same memory, so peers map each allocation once (ipc.c). */
#include <string.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "mem.h"
#include "mem_int.h"

/* One export of a span. Shared only while the memory behind it is the same: its key holds the
 * digest of the driver's buffer ids (pcl_mem_identity, ids never reused), so a span freed,
 * remade or remapped at the same addresses gets an export of its own. */
typedef struct {
  pcl_mem_shared_t link;        /* first: the list's view of it */
  uint64_t digest;              /* 0: not shareable (its identity could not be read) */
  pcl_mem_desc_t desc;          /* the export's fields; offset and bytes are per registration */
  pcl_ipc_fd_entry_t *fd_entry; /* CUMEM_FD only */
} mem_export_t;

struct pcl_mem_reg {
  pcl_mem_desc_t desc;
  mem_export_t *exp; /* NULL for PROCESS memory (nothing exported) */
};

static pcl_mem_shared_list_t g_exports = PCL_MEM_SHARED_LIST_INIT;

/* Walks the physical allocations behind [ptr, ptr + bytes) of cuMem memory, exports each as an fd
 * and publishes them. Fills base/span/nchunks/fd_* of d. */
static ncclResult_t export_cumem_fd(const pcl_cu_fns_t *cu, CUdeviceptr ptr, size_t bytes,
                                    pcl_mem_desc_t *d, pcl_ipc_fd_entry_t **entry) {
  ncclResult_t res = ncclSuccess;
  pcl_ipc_fd_chunk_t *chunks = NULL;
  uint32_t n = 0, cap = 4;
  CUdeviceptr cur = ptr, end = ptr + bytes, span_base = 0;
  chunks = pcl_calloc(cap, sizeof(*chunks), "cumem chunks");
  PCL_PTR_CHECK_GOTO(chunks, "cumem chunks", res, fail);
  while (cur < end) {
    CUdeviceptr b = 0;
    size_t s = 0;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    int fd = -1;
    PCL_CU_CHECK_GOTO(cu, mem_get_address_range(&b, &s, cur), res, fail);
    if (n == 0)
      span_base = b;
    else if (b != cur) {
      PCL_WARN(PCL_LOG_IPC, "registered cumem range is not contiguous at %p", (void *)cur);
      res = ncclInvalidArgument;
      goto fail;
    }
    if (n == PCL_MEM_MAX_CHUNKS) {
      PCL_WARN(PCL_LOG_IPC, "registered cumem range spans more than %u allocations",
               PCL_MEM_MAX_CHUNKS);
      res = ncclInvalidArgument;
      goto fail;
    }
    PCL_CU_CHECK_GOTO(cu, mem_retain_allocation_handle(&h, (void *)(uintptr_t)b), res, fail);
    CUresult r = cu->mem_get_allocation_properties_from_handle(&prop, h);
    if (r == CUDA_SUCCESS &&
        !(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
      PCL_WARN(PCL_LOG_IPC, "cumem allocation at %p has no POSIX-fd handle type", (void *)b);
      cu->mem_release(h);
      res = ncclInvalidArgument;
      goto fail;
    }
    if (r == CUDA_SUCCESS)
      r = cu->mem_export_to_shareable_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    cu->mem_release(h); /* drops only the reference the retain took */
    if (r != CUDA_SUCCESS) {
      res = pcl_cu_fail("cuMemExportToShareableHandle", r);
      goto fail;
    }
    if (n == cap) {
      pcl_ipc_fd_chunk_t *grown =
          pcl_realloc(chunks, cap, cap * 2, sizeof(*chunks), "cumem chunks");
      if (grown == NULL) {
        close(fd);
        res = ncclSystemError;
        goto fail;
      }
      chunks = grown;
      cap *= 2;
    }
    chunks[n].off = b - span_base;
    chunks[n].bytes = s;
    chunks[n].fd = fd;
    n++;
    cur = b + s;
  }
  d->base = span_base;
  d->span = cur - span_base;
  d->nchunks = n;
  /* publish takes the fds, also when it fails */
  res = pcl_ipc_fd_publish(chunks, n, &d->fd_server, &d->fd_secret, entry);
  pcl_free(chunks);
  return res;
fail:
  for (uint32_t i = 0; i < n; i++)
    close(chunks[i].fd);
  pcl_free(chunks);
  return res;
}

/* The span a cuMem registration of [ptr, ptr + bytes) exports: its allocations, side by side. */
static ncclResult_t cumem_span(const pcl_cu_fns_t *cu, CUdeviceptr ptr, size_t bytes,
                               CUdeviceptr *base, size_t *span) {
  CUdeviceptr cur = ptr, end = ptr + bytes;
  *base = 0;
  while (cur < end) {
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r = cu->mem_get_address_range(&b, &s, cur);
    if (r != CUDA_SUCCESS || s == 0)
      return r != CUDA_SUCCESS ? pcl_cu_fail("cuMemGetAddressRange", r) : ncclInvalidArgument;
    if (cur == ptr)
      *base = b;
    cur = b + s;
  }
  *span = cur - *base;
  return ncclSuccess;
}

/* key: a pcl_mem_reg's descriptor (kind, dev, base, span) and digest. */
typedef struct {
  const pcl_mem_desc_t *d;
  uint64_t digest;
} export_key_t;

static int export_match(const pcl_mem_shared_t *o, const void *key) {
  const mem_export_t *e = (const mem_export_t *)o;
  const export_key_t *k = key;
  return e->digest == k->digest && e->desc.kind == k->d->kind && e->desc.dev == k->d->dev &&
         e->desc.base == k->d->base && e->desc.span == k->d->span;
}

/* The live export of the same memory, with a reference taken, or NULL. */
static mem_export_t *export_find(const pcl_mem_desc_t *d, uint64_t digest) {
  export_key_t k = {d, digest};
  return digest == 0 ? NULL : (mem_export_t *)pcl_mem_shared_find(&g_exports, export_match, &k);
}

/* A new export of the span in d (kind, dev, base, span set), made and listed. */
static ncclResult_t export_new(const pcl_cu_fns_t *cu, CUdeviceptr ptr, size_t bytes,
                               const pcl_mem_desc_t *d, uint64_t digest, mem_export_t **out) {
  ncclResult_t res = ncclSuccess;
  mem_export_t *e = NULL;
  PCL_CALLOC(e, 1, "memory export");
  if (e == NULL)
    return ncclSystemError;
  e->desc = *d;
  e->digest = digest;
  e->desc.export_id = pcl_mem_random64() | 1u; /* never 0: importers key their mappings by it */
  if (d->kind == PCL_MEM_KIND_CUDA_IPC) {
    cudaIpcMemHandle_t ih;
    /* The handle names the whole allocation; the importer gets its base and adds the offset. */
    PCL_CUDA_CHECK_GOTO(cudaIpcGetMemHandle(&ih, (void *)(uintptr_t)d->base), res, fail);
    PCL_MEM_STATIC_ASSERT(sizeof(ih) == sizeof(e->desc.ipc), "ipc handle size");
    memcpy(e->desc.ipc, &ih, sizeof(ih));
  } else {
    PCL_CHECK_GOTO(export_cumem_fd(cu, ptr, bytes, &e->desc, &e->fd_entry), res, fail);
  }
  pcl_mem_shared_add(&g_exports, &e->link);
  *out = e;
  return ncclSuccess;
fail:
  pcl_free(e);
  return res;
}

static void export_put(mem_export_t *e) {
  if (e == NULL || !pcl_mem_shared_put(&g_exports, &e->link))
    return;
  pcl_ipc_fd_withdraw(e->fd_entry);
  pcl_free(e);
}

int pcl_mem_exports_live(void) {
  return pcl_mem_shared_count(&g_exports);
}

/* Exports the span of reg's buffer, or shares the live export of the same memory. */
static ncclResult_t reg_export(const pcl_cu_fns_t *cu, CUdeviceptr p, size_t bytes,
                               pcl_mem_reg_t *reg) {
  pcl_mem_desc_t *d = &reg->desc;
  if (d->kind == PCL_MEM_KIND_CUMEM_FD) {
    CUdeviceptr base = 0;
    size_t span = 0;
    PCL_CHECK(cumem_span(cu, p, bytes, &base, &span));
    d->base = base;
    d->span = span;
  }
  /* Unreadable identity: digest 0, an export of its own that nobody shares. */
  pcl_mem_identity_t id;
  uint64_t digest = pcl_mem_identity((void *)(uintptr_t)d->base, d->span, &id) == ncclSuccess &&
                            id.kind == (int)d->kind
                        ? id.digest
                        : 0;
  reg->exp = export_find(d, digest);
  if (reg->exp == NULL)
    PCL_CHECK(export_new(cu, p, bytes, d, digest, &reg->exp));
  const pcl_mem_desc_t *e = &reg->exp->desc;
  d->base = e->base;
  d->span = e->span;
  d->nchunks = e->nchunks;
  d->fd_server = e->fd_server;
  d->fd_secret = e->fd_secret;
  d->export_id = e->export_id;
  memcpy(d->ipc, e->ipc, sizeof(d->ipc));
  return ncclSuccess;
}

ncclResult_t pcl_mem_reg(void *ptr, size_t bytes, pcl_mem_reg_t **out) {
  ncclResult_t res = ncclSuccess;
  const pcl_cu_fns_t *cu = NULL;
  pcl_mem_reg_t *reg = NULL;
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr, base = 0;
  size_t size = 0;
  unsigned int mtype = 0;
  int ordinal = -1, legacy = 0;
  CUmemGenericAllocationHandle h;

  if (ptr == NULL || bytes == 0 || out == NULL) {
    PCL_WARN(PCL_LOG_IPC, "pcl_mem_reg: invalid argument (ptr %p, %zu bytes)", ptr, bytes);
    return ncclInvalidArgument;
  }
  PCL_CHECK(pcl_cu_load(&cu));
  if (cu->pointer_get_attribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS ||
      mtype != CU_MEMORYTYPE_DEVICE) {
    PCL_WARN(PCL_LOG_IPC, "pcl_mem_reg: %p is not device memory", ptr);
    return ncclInvalidArgument;
  }
  PCL_CALLOC(reg, 1, "memory registration");
  PCL_PTR_CHECK_GOTO(reg, "memory registration", res, fail);
  PCL_CU_CHECK_GOTO(cu, pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p),
                    res, fail);
  PCL_CU_CHECK_GOTO(cu, mem_get_address_range(&base, &size, p), res, fail);
  if (cu->pointer_get_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) !=
      CUDA_SUCCESS)
    legacy = 0;
  reg->desc.magic = PCL_MEM_DESC_MAGIC;
  reg->desc.version = PCL_MEM_DESC_VERSION;
  reg->desc.dev = ordinal;
  reg->desc.proc_token = pcl_mem_proc_token();
  reg->desc.base = base;
  reg->desc.span = size;
  reg->desc.bytes = bytes;

  if (legacy) {
    reg->desc.kind = PCL_MEM_KIND_CUDA_IPC;
  } else if (cu->mem_retain_allocation_handle(&h, (void *)(uintptr_t)base) == CUDA_SUCCESS) {
    CUmemAllocationProp prop;
    CUresult r = cu->mem_get_allocation_properties_from_handle(&prop, h);
    cu->mem_release(h);
    reg->desc.flags |= PCL_MEM_FLAG_VMM;
    reg->desc.kind =
        r == CUDA_SUCCESS && (prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
            ? PCL_MEM_KIND_CUMEM_FD
            : PCL_MEM_KIND_PROCESS;
  } else {
    reg->desc.kind = PCL_MEM_KIND_PROCESS;
  }
  if (reg->desc.kind != PCL_MEM_KIND_PROCESS)
    PCL_CHECK_GOTO(reg_export(cu, p, bytes, reg), res, fail);
  reg->desc.offset = p - reg->desc.base;
  if (reg->desc.kind != PCL_MEM_KIND_CUMEM_FD && reg->desc.offset + bytes > reg->desc.span) {
    PCL_WARN(PCL_LOG_IPC, "pcl_mem_reg: [%p, +%zu) runs past its allocation of %zu bytes", ptr,
             bytes, size);
    res = ncclInvalidArgument;
    goto fail;
  }
  PCL_CHECK_GOTO(pcl_mem_desc_check(&reg->desc), res, fail);
  PCL_INFO(PCL_LOG_IPC, "registered %p +%zu on dev %d as %s (span %p +%llu, export %llx)", ptr,
           bytes, ordinal, pcl_mem_kind_name(reg->desc.kind), (void *)(uintptr_t)reg->desc.base,
           (unsigned long long)reg->desc.span, (unsigned long long)reg->desc.export_id);
  *out = reg;
  return ncclSuccess;
fail:
  pcl_mem_dereg(reg);
  return res;
}

const pcl_mem_desc_t *pcl_mem_reg_desc(const pcl_mem_reg_t *reg) {
  return &reg->desc;
}

void pcl_mem_dereg(pcl_mem_reg_t *reg) {
  if (reg == NULL)
    return;
  export_put(reg->exp); /* the last registration of a span withdraws its fds */
  pcl_free(reg);
}
