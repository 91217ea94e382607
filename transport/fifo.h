/* SPDX-License-Identifier: MIT
 * The port-channel FIFO's host object: creation, the consumer side the proxy polls, and a CPU
 * producer for tests and host-driven channels. The shared ABI and the device push are in
 * fifo_device.h. */
#ifndef PCL_FIFO_H
#define PCL_FIFO_H

#include <stdint.h>
#include <nccl.h>
#include "fifo_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- host FIFO object (transport/fifo.c) ---- */

typedef enum {
  PCL_FIFO_MEM_AUTO = 0, /* CUDA when a GPU is visible, else host */
  PCL_FIFO_MEM_HOST = 1, /* plain aligned host memory (CPU tests: a thread plays the GPU) */
  PCL_FIFO_MEM_CUDA = 2, /* cudaHostAllocMapped ring + tail, cudaMalloc head + tail cache */
} pcl_fifo_mem_t;

typedef struct pcl_fifo pcl_fifo_t;

/* size: power of two >= 2 (0 = PCL_FIFO_DEFAULT_SIZE). With CUDA memory the current device is
 * used and the head lives in its memory. */
ncclResult_t pcl_fifo_create(uint32_t size, pcl_fifo_mem_t mem, pcl_fifo_t **out);
void pcl_fifo_destroy(pcl_fifo_t *f);

/* The descriptor to hand to kernels (device addresses) or to a CPU producer thread. */
pcl_fifo_device_t pcl_fifo_device(const pcl_fifo_t *f);

/* Consumer (one thread): 1 and *out filled when the slot at the current tail is committed. */
int pcl_fifo_poll(pcl_fifo_t *f, pcl_fifo_trigger_t *out);
/* Consumer: position of the slot pcl_fifo_poll looks at (= triggers consumed so far). */
uint64_t pcl_fifo_tail(const pcl_fifo_t *f);
/* Consumer: consume the polled slot (release-store of tail + 1). */
void pcl_fifo_pop(pcl_fifo_t *f);

/* CPU producer, same protocol as the device push (host-memory FIFOs only; for tests and
 * host-driven port channels). Returns the position, or UINT64_MAX on abort. */
uint64_t pcl_fifo_host_push(pcl_fifo_device_t f, uint64_t w0, uint64_t w1,
                            const volatile uint32_t *abort_flag);
/* CPU producer: waits until *tail > pos; 0, or 1 on abort. */
int pcl_fifo_host_wait(pcl_fifo_device_t f, uint64_t pos, const volatile uint32_t *abort_flag);

#ifdef __cplusplus
}
#endif

#endif
