/* SPDX-License-Identifier: MIT
 * GPU memory registration: allocate device buffers that peers can map, register a local buffer
 * into a fixed-size export descriptor (plain bytes, sent over the bootstrap), and import a peer's
 * descriptor into a pointer usable by this process's kernels. */
#ifndef PCL_MEM_H
#define PCL_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#define PCL_MEM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define PCL_MEM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* ---- allocation ------------------------------------------------------------------------------ */

typedef enum {
  PCL_MEM_ALLOC_AUTO = 0, /* cuMem with a POSIX-fd handle where the device supports it, else CUDA */
  PCL_MEM_ALLOC_CUDA = 1, /* cudaMalloc (exported through legacy CUDA IPC) */
  PCL_MEM_ALLOC_CUMEM = 2, /* cuMemCreate + map, exportable as a POSIX fd (like ncclMemAlloc) */
} pcl_mem_alloc_kind_t;

typedef struct pcl_mem_alloc {
  void *ptr;       /* device address, zero-filled */
  size_t bytes;    /* usable bytes (>= requested; cuMem rounds up to the allocation granularity) */
  int dev;         /* CUDA device ordinal */
  int kind;        /* PCL_MEM_ALLOC_CUDA or PCL_MEM_ALLOC_CUMEM, never AUTO */
  uint64_t handle; /* private: cuMem allocation handle */
} pcl_mem_alloc_t;

/* Allocates `bytes` (> 0) on device `dev` and zero-fills it; the caller's current device is kept.
 * cuMem allocations are made accessible to `dev` and every device that can access it as a peer
 * (as ncclMemAlloc does), so same-process peers need no further setup. */
ncclResult_t pcl_mem_alloc(int dev, size_t bytes, pcl_mem_alloc_kind_t kind, pcl_mem_alloc_t **out);
/* Frees; NULL is ok; warns (never fails) when the driver refuses. */
void pcl_mem_free(pcl_mem_alloc_t *a);

/* ---- export descriptor ----------------------------------------------------------------------- */

#define PCL_MEM_DESC_MAGIC 0x4d4c4350u /* "PCLM" little-endian */
#define PCL_MEM_DESC_VERSION 1u
#define PCL_MEM_DESC_BYTES 192u
#define PCL_MEM_MAX_CHUNKS 1024u /* physical allocations behind one cuMem registration */

typedef enum {
  PCL_MEM_KIND_PROCESS = 1,  /* only importable inside the owner process (direct pointer) */
  PCL_MEM_KIND_CUDA_IPC = 2, /* cudaMalloc memory: legacy CUDA IPC handle of the allocation base */
  PCL_MEM_KIND_CUMEM_FD = 3, /* cuMem memory: POSIX fds fetched from the owner's fd server */
} pcl_mem_kind_t;

#define PCL_MEM_FLAG_VMM                                                                           \
  1u /* the span is cuMem (VMM) memory: same-process peers need SetAccess                          \
      */

/* Wire format: fixed-width fields, no pointers, no padding; both ends are on one host (IPC), so
 * the native byte order is used. Every field is validated by pcl_mem_desc_check() on import. */
typedef struct {
  uint32_t magic;       /* PCL_MEM_DESC_MAGIC */
  uint16_t version;     /* PCL_MEM_DESC_VERSION */
  uint16_t kind;        /* pcl_mem_kind_t */
  int32_t dev;          /* owner's CUDA device ordinal */
  uint32_t flags;       /* PCL_MEM_FLAG_* */
  uint64_t proc_token;  /* owner process identity: equal tokens = same address space */
  uint64_t base;        /* owner's address of the mapped span (allocation base) */
  uint64_t span;        /* bytes mapped from base; the importer maps all of them */
  uint64_t offset;      /* the registered buffer starts at base + offset */
  uint64_t bytes;       /* registered bytes; offset + bytes <= span */
  uint64_t fd_server;   /* CUMEM_FD: id of the owner's fd server socket */
  uint64_t fd_secret;   /* CUMEM_FD: secret naming this registration at that server */
  uint32_t nchunks;     /* CUMEM_FD: physical allocations behind the span, 1..PCL_MEM_MAX_CHUNKS */
  uint32_t reserved0;   /* zero */
  uint8_t ipc[64];      /* CUDA_IPC: cudaIpcMemHandle_t of base */
  uint64_t export_id;   /* CUDA_IPC, CUMEM_FD: names the owner's export of the span (never 0),
                         * shared by its registrations of the same memory: importers map it once */
  uint8_t reserved[40]; /* zero */
} pcl_mem_desc_t;

PCL_MEM_STATIC_ASSERT(sizeof(pcl_mem_desc_t) == PCL_MEM_DESC_BYTES, "descriptor size is pinned");
PCL_MEM_STATIC_ASSERT(offsetof(pcl_mem_desc_t, ipc) == 80, "descriptor layout is pinned");

/* ncclSuccess when `d` is a well-formed descriptor; else ncclInvalidArgument with a WARN naming the
 * bad field. Needs no GPU. */
ncclResult_t pcl_mem_desc_check(const pcl_mem_desc_t *d);
/* Human-readable kind ("process", "cuda-ipc", "cumem-fd", "?"). */
const char *pcl_mem_kind_name(int kind);

/* ---- registration (exporter side) ------------------------------------------------------------ */

typedef struct pcl_mem_reg pcl_mem_reg_t;

/* Registers [ptr, ptr + bytes) of device memory. The kind follows from the pointer: legacy-IPC
 * capable (cudaMalloc) -> CUDA_IPC; cuMem with a POSIX-fd handle type -> CUMEM_FD (spans of
 * several physical allocations are supported); anything else device-resident -> PROCESS. Host
 * memory, unknown pointers and bytes == 0 are ncclInvalidArgument. Registrations whose span
 * (the allocation, or the cuMem allocations the buffer touches) is the same memory share one
 * export, reference-counted; memory freed, remade or remapped since is exported anew
 * (pcl_mem_identity's digest decides, never the address alone). Thread-safe. */
ncclResult_t pcl_mem_reg(void *ptr, size_t bytes, pcl_mem_reg_t **out);
/* The descriptor to send to peers (valid until pcl_mem_dereg). */
const pcl_mem_desc_t *pcl_mem_reg_desc(const pcl_mem_reg_t *reg);
/* Drops the registration; the last one of an export closes its fds and withdraws them from the
 * fd server. NULL is ok. Peers that already imported keep a valid mapping until they close it. */
void pcl_mem_dereg(pcl_mem_reg_t *reg);
/* Exports alive in this process (tests): registrations of the same memory share one. */
int pcl_mem_exports_live(void);

/* ---- identity ---------------------------------------------------------------------------- */

typedef struct {
  uint64_t digest; /* changes when an allocation behind the buffer is freed, remade or remapped */
  int kind;        /* what pcl_mem_reg would make of it: PCL_MEM_KIND_CUDA_IPC, _CUMEM_FD (every
                    * mapping has a POSIX-fd handle type), _PROCESS; 0: not one device buffer */
  int nalloc;      /* allocations (mappings) behind it */
  uint64_t base;   /* the span they make: the first one's base ... */
  uint64_t end;    /* ... to the last one's end (0, 0 when kind is 0); its identity is this one's */
} pcl_mem_identity_t;

/* Local and cheap (two or three driver queries per allocation, no export): the allocations
 * behind [ptr, ptr + bytes). kind 0 for host memory, holes and ranges past their allocation. */
ncclResult_t pcl_mem_identity(const void *ptr, size_t bytes, pcl_mem_identity_t *out);

/* One allocation (mapping) behind a buffer: what the identity digests. */
typedef struct {
  uint64_t base, size, id; /* its address range and the driver's buffer id */
} pcl_mem_chunk_t;

/* pcl_mem_identity, and its allocations in ascending order in chunks[0 .. min(out->nalloc, max))
 * (valid when out->kind is not 0): so that memory can be checked a part at a time. */
ncclResult_t pcl_mem_identity_chunks(const void *ptr, size_t bytes, pcl_mem_identity_t *out,
                                     pcl_mem_chunk_t *chunks, int max);

/* ---- import (peer side) ---------------------------------------------------------------------- */

typedef struct pcl_mem_import pcl_mem_import_t;

/* Maps a peer's registration for kernels running on `local_dev` (the caller's current device is
 * kept); a second registration of an export already mapped for that device reuses the mapping
 * (reference-counted, thread-safe). Same process: the owner's pointer, after enabling peer access
 * (or cuMemSetAccess for VMM memory); "already enabled" is fine. Other process:
 * cudaIpcOpenMemHandle, or fds fetched from the owner's server +
 * cuMemImportFromShareableHandle/AddressReserve/Map/SetAccess. */
ncclResult_t pcl_mem_import(const pcl_mem_desc_t *desc, int local_dev, pcl_mem_import_t **out);
/* The imported buffer's first byte (owner's base + offset, in this process's address space). */
void *pcl_mem_import_ptr(const pcl_mem_import_t *imp);
/* How it was mapped: PCL_MEM_KIND_PROCESS for a direct same-process pointer, else the kind. */
int pcl_mem_import_kind(const pcl_mem_import_t *imp);
/* Drops the import; the last one of a mapping unmaps it (cudaIpcCloseMemHandle, or cuMemUnmap +
 * cuMemAddressFree). NULL is ok. */
void pcl_mem_import_close(pcl_mem_import_t *imp);
/* Mappings of peers' exports alive in this process (tests): imports of one export on one device
 * share one. */
int pcl_mem_mappings_live(void);

#ifdef __cplusplus
}
#endif

#endif
