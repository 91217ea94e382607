/* SPDX-License-Identifier: MIT
 * Memory channels: per connected peer, device-to-device semaphores (monotonic 64-bit counters) and
 * the peer's buffers mapped into this process, built collectively over the bootstrap. The device
 * struct the kernels read is kernels/kernel_abi.h's pcl_kmemchan_t; the executor copies the
 * addresses of pcl_memchan_info_t into it (transport does not include kernels/). */
#ifndef PCL_MEMCHAN_H
#define PCL_MEMCHAN_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "bootstrap.h"
#include "mem.h"

typedef struct pcl_memchan pcl_memchan_t;
typedef struct pcl_memchan_buf pcl_memchan_buf_t;

typedef struct {
  int cuda_dev;           /* this rank's device; kernels using the channels run on it */
  int nchannels;          /* semaphore pairs per connected peer, 1..PCL_MEMCHAN_MAX_CHANNELS */
  const uint8_t *connect; /* [nranks]: nonzero = build channels to that peer; NULL = every other
                             rank. Must be symmetric across ranks (each side imports the other);
                             self is ignored. Typically: same host and peer access (topo). */
  void *scratch;          /* exposed to connected peers; NULL (with scratch_bytes 0) = none */
  size_t scratch_bytes;
  pcl_mem_alloc_kind_t sem_kind; /* allocation of the counters; AUTO by default (zero) */
} pcl_memchan_config_t;

#define PCL_MEMCHAN_MAX_CHANNELS 1024

/* One (peer, channel) as the kernels of cuda_dev see it. Addresses are device addresses stored as
 * integers (as in pcl_kmemchan_t), valid until pcl_memchan_destroy.
 * Protocol (kernels/packet.cuh implements it): signal = release system-scope atomic add of 1 to
 * *remote_inbound; wait = ++*local_expected, then acquire-poll *local_inbound until >= it. Only
 * the peer writes *local_inbound; only this rank's single waiter of the channel touches
 * *local_expected. All counters start at 0 and are never reset. */
typedef struct {
  uint64_t remote_inbound; /* the peer's inbound counter for (me, channel), peer-mapped */
  uint64_t local_inbound;  /* my inbound counter for (peer, channel), in my device memory */
  uint64_t local_expected; /* my expected count for (peer, channel), in my device memory */
  uint64_t remote_scratch; /* the peer's scratch base, peer-mapped; 0 when it exposed none */
  uint64_t remote_scratch_bytes;
} pcl_memchan_info_t;

/* Collective over all ranks of `b` (every rank calls it, connected or not). Allocates and zeroes
 * this rank's counters (2 x nranks x nchannels x 8 bytes), registers them and the scratch buffer,
 * exchanges descriptors, imports the connected peers' ones and agrees on the outcome: either
 * every rank succeeds or every rank returns an error (the first failing rank's WARN says why).
 * `b` must stay alive until pcl_memchan_destroy (pcl_memchan_buf_reg uses it). */
ncclResult_t pcl_memchan_create(pcl_bootstrap_t *b, const pcl_memchan_config_t *cfg,
                                pcl_memchan_t **out);

/* Local only, never waits for peers (safe at abort, after a failed peer). Unmaps everything
 * imported, withdraws this rank's exports and frees the counters. Buffers registered with
 * pcl_memchan_buf_reg must be released first (a WARN names leftovers, which are then released).
 * The caller must have stopped (or aborted) every kernel using the channels. NULL is ok. */
void pcl_memchan_destroy(pcl_memchan_t *mc);

/* 1 when channels to `peer` exist. */
int pcl_memchan_connected(const pcl_memchan_t *mc, int peer);
int pcl_memchan_nchannels(const pcl_memchan_t *mc);

/* Channel `channel` to connected `peer`; ncclInvalidArgument otherwise. */
ncclResult_t pcl_memchan_info(const pcl_memchan_t *mc, int peer, int channel,
                              pcl_memchan_info_t *out);

/* ---- user buffers (ncclCommRegister / ncclMemAlloc buffers for zero-copy plans) ---- */

/* Collective like create: every rank registers its own [ptr, ptr + bytes) (ptr NULL / bytes 0 =
 * this rank exposes nothing) and imports the connected peers' buffers. All ranks succeed or all
 * fail. */
ncclResult_t pcl_memchan_buf_reg(pcl_memchan_t *mc, void *ptr, size_t bytes,
                                 pcl_memchan_buf_t **out);
/* The peer's buffer base mapped for cuda_dev (0 when not connected or it exposed nothing). */
uint64_t pcl_memchan_buf_remote(const pcl_memchan_buf_t *buf, int peer, uint64_t *bytes);
/* Local only; NULL is ok. */
void pcl_memchan_buf_release(pcl_memchan_buf_t *buf);

#ifdef __cplusplus
}
#endif

#endif
