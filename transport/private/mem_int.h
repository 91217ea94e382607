/* SPDX-License-Identifier: MIT
 * Private to transport/'s GPU-memory files: the CUDA driver entry points (always resolved through
 * cudaGetDriverEntryPointByVersion, never linked), the process identity token, the
 * file-descriptor server that hands cuMem allocations to peer processes, and the lists of
 * exports and mappings shared between registrations (mem_shared.c). */
#ifndef PCL_MEM_INT_H
#define PCL_MEM_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include <nccl.h>

/* Driver functions, at the ABI of CUDA 12.0 (every one exists in older 12.x drivers too). */
typedef struct {
  CUresult (*get_error_string)(CUresult, const char **);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
  CUresult (*mem_get_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
  CUresult (*mem_retain_allocation_handle)(CUmemGenericAllocationHandle *, void *);
  CUresult (*mem_get_allocation_properties_from_handle)(CUmemAllocationProp *,
                                                        CUmemGenericAllocationHandle);
  CUresult (*mem_get_allocation_granularity)(size_t *, const CUmemAllocationProp *,
                                             CUmemAllocationGranularity_flags);
  CUresult (*mem_export_to_shareable_handle)(void *, CUmemGenericAllocationHandle,
                                             CUmemAllocationHandleType, unsigned long long);
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle *, void *,
                                               CUmemAllocationHandleType);
  CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                         unsigned long long);
  CUresult (*mem_release)(CUmemGenericAllocationHandle);
  CUresult (*mem_address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*mem_address_free)(CUdeviceptr, size_t);
  CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                      unsigned long long);
  CUresult (*mem_unmap)(CUdeviceptr, size_t);
  CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
} pcl_cu_fns_t;

/* Resolves the driver functions once per process. Without a driver (or with one too old) it
 * returns ncclSystemError and WARNs once; later calls return the same result without logging. */
ncclResult_t pcl_cu_load(const pcl_cu_fns_t **out);

/* Logs a failed driver call once with the driver's own text; returns ncclUnhandledCudaError. */
ncclResult_t pcl_cu_fail(const char *call, CUresult res);

#define PCL_CU_CHECK_GOTO(fns, call, res, label)                                                   \
  do {                                                                                             \
    CUresult pcl_cures_ = (fns)->call;                                                             \
    if (pcl_cures_ != CUDA_SUCCESS) {                                                              \
      (res) = pcl_cu_fail(#call, pcl_cures_);                                                      \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

/* A random 64-bit value naming this process; regenerated after fork() so a child never claims to
 * be its parent. Two descriptors with equal tokens come from the same address space. */
uint64_t pcl_mem_proc_token(void);

/* Random 64-bit value from getrandom(), falling back to time and pid. */
uint64_t pcl_mem_random64(void);

/* One physical allocation behind a cuMem span: [off, off + bytes) relative to the span base. */
typedef struct {
  uint64_t off;
  uint64_t bytes;
  int fd; /* exported POSIX file descriptor, owned by the server entry */
} pcl_ipc_fd_chunk_t;

typedef struct pcl_ipc_fd_entry pcl_ipc_fd_entry_t;

/* Publishes `nchunks` exported fds (ownership of the fds moves to the entry, also on failure)
 * at this process's fd server, starting the server when it is the first entry. Returns the
 * server id and the entry's secret, which importers present to fetch a chunk. */
ncclResult_t pcl_ipc_fd_publish(const pcl_ipc_fd_chunk_t *chunks, uint32_t nchunks,
                                uint64_t *server_id, uint64_t *secret, pcl_ipc_fd_entry_t **out);

/* Withdraws an entry and closes its fds; stops the server thread with the last entry. */
void pcl_ipc_fd_withdraw(pcl_ipc_fd_entry_t *entry);

/* Fetches chunk `index` of the entry named by (server_id, secret) from the owner process.
 * On success *fd is a new descriptor owned by the caller. Never blocks longer than the
 * bootstrap timeout. */
ncclResult_t pcl_ipc_fd_fetch(uint64_t server_id, uint64_t secret, uint32_t index, int *fd,
                              uint64_t *off, uint64_t *bytes);

/* Number of live entries at this process's server (tests). */
int pcl_ipc_fd_server_entries(void);

/* A process-wide list of reference-counted objects shared by several users (exports of one span,
 * mappings of one export): an object embeds pcl_mem_shared_t as its first member. Thread-safe. */
typedef struct pcl_mem_shared {
  struct pcl_mem_shared *next;
  int refs;
} pcl_mem_shared_t;

typedef struct {
  pthread_mutex_t lock;
  pcl_mem_shared_t *head;
  int n;
} pcl_mem_shared_list_t;

#define PCL_MEM_SHARED_LIST_INIT                                                                   \
  { PTHREAD_MUTEX_INITIALIZER, NULL, 0 }

/* The first object `match` accepts, with a reference taken, or NULL. */
pcl_mem_shared_t *pcl_mem_shared_find(pcl_mem_shared_list_t *l,
                                      int (*match)(const pcl_mem_shared_t *o, const void *key),
                                      const void *key);
/* Lists o with one reference (the caller's). */
void pcl_mem_shared_add(pcl_mem_shared_list_t *l, pcl_mem_shared_t *o);
/* Drops a reference; 1 when it was the last: o is unlisted and the caller frees it. */
int pcl_mem_shared_put(pcl_mem_shared_list_t *l, pcl_mem_shared_t *o);
/* Objects listed (tests). */
int pcl_mem_shared_count(pcl_mem_shared_list_t *l);

#endif
