/* SPDX-License-Identifier: MIT
 * Host side of the port-channel FIFO: allocation (pinned + device-mapped with a GPU, plain
 * aligned memory for CPU tests), the consumer's poll/pop, and a CPU producer for tests. */
#define _GNU_SOURCE
#include "fifo.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "pcl_abort.h"
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"

struct pcl_fifo {
  pcl_fifo_mem_t mem;
  pcl_fifo_device_t dev;      /* device view (device addresses in CUDA mode) */
  pcl_fifo_trigger_t *h_trig; /* host addresses of the ring and the tail */
  uint64_t *h_tail;
  void *host_block; /* HOST mode: one aligned block (ring, head, tail, cache) */
  uint64_t tail;    /* consumer's private copy */
};

static int log2u(uint32_t v) {
  int l = 0;
  while ((1u << l) < v)
    l++;
  return l;
}

static ncclResult_t create_cuda(pcl_fifo_t *f, uint32_t size) {
  ncclResult_t res = ncclSuccess;
  void *ring = NULL, *tail = NULL, *head = NULL;
  size_t ring_bytes = (size_t)size * sizeof(pcl_fifo_trigger_t);
  PCL_CUDA_CHECK_GOTO(cudaHostAlloc(&ring, ring_bytes, cudaHostAllocMapped), res, err);
  memset(ring, 0, ring_bytes);
  PCL_CUDA_CHECK_GOTO(cudaHostAlloc(&tail, 64, cudaHostAllocMapped), res, err);
  memset(tail, 0, 64);
  /* head and tail cache: two counters in one device allocation. */
  PCL_CUDA_CHECK_GOTO(cudaMalloc(&head, 2 * sizeof(uint64_t)), res, err);
  PCL_CUDA_CHECK_GOTO(cudaMemset(head, 0, 2 * sizeof(uint64_t)), res, err);
  void *d_ring = NULL, *d_tail = NULL;
  PCL_CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&d_ring, ring, 0), res, err);
  PCL_CUDA_CHECK_GOTO(cudaHostGetDevicePointer(&d_tail, tail, 0), res, err);
  f->h_trig = ring;
  f->h_tail = tail;
  f->dev.triggers = d_ring;
  f->dev.tail = d_tail;
  f->dev.head = head;
  f->dev.tail_cache = (uint64_t *)head + 1;
  return ncclSuccess;
err:
  if (head)
    cudaFree(head);
  if (tail)
    cudaFreeHost(tail);
  if (ring)
    cudaFreeHost(ring);
  return res;
}

static ncclResult_t create_host(pcl_fifo_t *f, uint32_t size) {
  size_t ring_bytes = (size_t)size * sizeof(pcl_fifo_trigger_t);
  /* ring | head (own cache line) | tail (own line) | tail cache */
  size_t bytes = ring_bytes + 3 * 64;
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes) != 0) {
    PCL_WARN(PCL_LOG_PORT, "fifo: out of memory (%zu bytes)", bytes);
    return ncclSystemError;
  }
  memset(p, 0, bytes);
  f->host_block = p;
  f->h_trig = p;
  f->dev.triggers = p;
  f->dev.head = (uint64_t *)((char *)p + ring_bytes);
  f->h_tail = (uint64_t *)((char *)p + ring_bytes + 64);
  f->dev.tail = f->h_tail;
  f->dev.tail_cache = (uint64_t *)((char *)p + ring_bytes + 128);
  return ncclSuccess;
}

ncclResult_t pcl_fifo_create(uint32_t size, pcl_fifo_mem_t mem, pcl_fifo_t **out) {
  ncclResult_t res;
  pcl_fifo_t *f = NULL;
  if (size == 0)
    size = PCL_FIFO_DEFAULT_SIZE;
  if (size < 2 || (size & (size - 1)) != 0 || size > (1u << 24)) {
    PCL_WARN(PCL_LOG_PORT, "fifo: size %u is not a power of two in [2, 2^24]", size);
    return ncclInvalidArgument;
  }
  if (mem == PCL_FIFO_MEM_AUTO) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    mem = n > 0 ? PCL_FIFO_MEM_CUDA : PCL_FIFO_MEM_HOST;
  }
  PCL_CALLOC(f, 1, "fifo");
  if (f == NULL)
    return ncclSystemError;
  f->mem = mem;
  f->dev.size = size;
  f->dev.log2_size = (uint32_t)log2u(size);
  res = mem == PCL_FIFO_MEM_CUDA ? create_cuda(f, size) : create_host(f, size);
  if (res != ncclSuccess) {
    pcl_free(f);
    return res;
  }
  *out = f;
  return ncclSuccess;
}

void pcl_fifo_destroy(pcl_fifo_t *f) {
  if (f == NULL)
    return;
  if (f->mem == PCL_FIFO_MEM_CUDA) {
    cudaError_t e1 = cudaFree(f->dev.head), e2 = cudaFreeHost(f->h_tail),
                e3 = cudaFreeHost(f->h_trig);
    if (e1 != cudaSuccess || e2 != cudaSuccess || e3 != cudaSuccess)
      PCL_WARN(PCL_LOG_PORT, "fifo: freeing CUDA memory failed (%s)",
               cudaGetErrorString(e1 != cudaSuccess   ? e1
                                  : e2 != cudaSuccess ? e2
                                                      : e3));
  } else {
    free(f->host_block);
  }
  pcl_free(f);
}

pcl_fifo_device_t pcl_fifo_device(const pcl_fifo_t *f) {
  return f->dev;
}

uint64_t pcl_fifo_tail(const pcl_fifo_t *f) {
  return f->tail;
}

int pcl_fifo_poll(pcl_fifo_t *f, pcl_fifo_trigger_t *out) {
  pcl_fifo_trigger_t *slot = &f->h_trig[f->tail & (f->dev.size - 1)];
  /* Acquire on w1 (carrying the commit bit) orders the read of w0 after it. */
  uint64_t w1 = atomic_load_explicit((_Atomic uint64_t *)&slot->w1, memory_order_acquire);
  if (!pcl_fifo_slot_valid(w1, f->tail, f->dev.log2_size))
    return 0;
  out->w0 = atomic_load_explicit((_Atomic uint64_t *)&slot->w0, memory_order_relaxed);
  out->w1 = w1 & ~PCL_FIFO_COMMIT_BIT;
  return 1;
}

void pcl_fifo_pop(pcl_fifo_t *f) {
  f->tail++;
  /* Release: everything the proxy did for this trigger happens-before a producer seeing it. */
  atomic_store_explicit((_Atomic uint64_t *)f->h_tail, f->tail, memory_order_release);
}

uint64_t pcl_fifo_host_push(pcl_fifo_device_t f, uint64_t w0, uint64_t w1,
                            const volatile uint32_t *abort_flag) {
  uint64_t pos = atomic_fetch_add_explicit((_Atomic uint64_t *)f.head, 1, memory_order_relaxed);
  while (pos >= (uint64_t)f.size +
                    atomic_load_explicit((_Atomic uint64_t *)f.tail, memory_order_acquire)) {
    if (pcl_abort_requested(abort_flag))
      return UINT64_MAX;
    sched_yield();
  }
  pcl_fifo_trigger_t *slot = &f.triggers[pos & (f.size - 1)];
  /* The CPU has no single 16-byte release store: w0 first, then w1 (with the commit bit) with
   * release, which the consumer's acquire load of w1 pairs with. */
  atomic_store_explicit((_Atomic uint64_t *)&slot->w0, w0, memory_order_relaxed);
  w1 = (w1 & ~PCL_FIFO_COMMIT_BIT) | pcl_fifo_commit_for(pos, f.log2_size);
  atomic_store_explicit((_Atomic uint64_t *)&slot->w1, w1, memory_order_release);
  return pos;
}

int pcl_fifo_host_wait(pcl_fifo_device_t f, uint64_t pos, const volatile uint32_t *abort_flag) {
  while (atomic_load_explicit((_Atomic uint64_t *)f.tail, memory_order_acquire) <= pos) {
    if (pcl_abort_requested(abort_flag))
      return 1;
    sched_yield();
  }
  return 0;
}
