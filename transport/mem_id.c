/* SPDX-License-Identifier: MIT
 * The identity of the device memory behind a buffer: which allocations hold it (cuMem spans of
 * several), whether peer processes could map them, and a digest that changes whenever any of
 * them is freed, reallocated or remapped (the driver's buffer ids are never reused). */
#include "log.h"
#include "mem.h"
#include "mem_int.h"
#include "pcl_check.h"

/* FNV-1a over 64-bit words: a digest, not a security boundary (a collision needs two buffer ids
 * sets that hash alike, 2^-64 per comparison). */
static uint64_t mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}

ncclResult_t pcl_mem_identity(const void *ptr, size_t bytes, pcl_mem_identity_t *out) {
  return pcl_mem_identity_chunks(ptr, bytes, out, NULL, 0);
}

ncclResult_t pcl_mem_identity_chunks(const void *ptr, size_t bytes, pcl_mem_identity_t *out,
                                     pcl_mem_chunk_t *chunks, int max) {
  const pcl_cu_fns_t *cu = NULL;
  const CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr, end = p + bytes;
  unsigned int mtype = 0;
  int legacy = 0;
  out->digest = 0;
  out->kind = 0;
  out->nalloc = 0;
  out->base = out->end = 0;
  if (ptr == NULL || bytes == 0 || end < p)
    return ncclInvalidArgument;
  PCL_CHECK(pcl_cu_load(&cu));
  if (cu->pointer_get_attribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS ||
      mtype != CU_MEMORYTYPE_DEVICE)
    return ncclSuccess; /* host, managed-on-host or unknown: kind 0, nobody can map it */
  if (cu->pointer_get_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) !=
      CUDA_SUCCESS)
    legacy = 0;
  uint64_t h = 0xcbf29ce484222325ull;
  int kind = legacy ? PCL_MEM_KIND_CUDA_IPC : PCL_MEM_KIND_CUMEM_FD;
  CUdeviceptr cur = p, first = 0;
  /* cudaMalloc memory is one allocation; cuMem memory may be several mappings side by side,
   * each with its own buffer id and handle types. */
  while (cur < end) {
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned long long id = 0, types = 0;
    if (cu->mem_get_address_range(&base, &size, cur) != CUDA_SUCCESS || size == 0 ||
        cu->pointer_get_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, cur) != CUDA_SUCCESS)
      return ncclSuccess; /* a hole: not one buffer of device memory */
    if (legacy && base + size < end)
      return ncclSuccess; /* runs past its cudaMalloc allocation */
    if (!legacy && (cu->pointer_get_attribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                              cur) != CUDA_SUCCESS ||
                    !(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)))
      kind = PCL_MEM_KIND_PROCESS;
    h = mix(mix(mix(h, base), size), id);
    if (out->nalloc == 0)
      first = base;
    if (out->nalloc < max)
      chunks[out->nalloc] = (pcl_mem_chunk_t){base, size, id};
    out->nalloc++;
    if (out->nalloc > (int)PCL_MEM_MAX_CHUNKS)
      return ncclSuccess; /* more than a registration may span */
    cur = base + size;
  }
  out->digest = h;
  out->kind = kind;
  out->base = first;
  out->end = cur;
  return ncclSuccess;
}
