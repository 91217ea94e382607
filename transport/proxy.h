/* SPDX-License-Identifier: MIT
 * Port-channel proxy: one thread per communicator and device that drains the GPU->host FIFO and
 * drives the transports. Memory is named by ids (a table of registered regions with per-peer
 * remote descriptors), channels by ids (peer + transport connection + the peer's semaphore). */
#ifndef PCL_PROXY_H
#define PCL_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "bootstrap.h"
#include "fifo.h"
#include "transport.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct pcl_proxy pcl_proxy_t;

typedef struct {
  int rank, nranks;
  int cuda_dev;                  /* -1: no GPU (CPU tests: host FIFO, host memory only) */
  const char *bus_id;            /* the GPU's PCI bus id for CPU pinning; NULL/"" = no pinning */
  pcl_bootstrap_t *bootstrap;    /* used by pcl_proxy_connect only */
  volatile uint32_t *abort_flag; /* the communicator's; may be NULL */
  pcl_fifo_mem_t fifo_mem;       /* PCL_FIFO_MEM_AUTO: CUDA when cuda_dev >= 0 */
  uint32_t fifo_size;            /* 0: PCL_FIFO_DEFAULT_SIZE */
} pcl_proxy_config_t;

/* A channel: triggers naming it go to `peer` over the connection of kind `kind`; its flags
 * increment the peer's 64-bit semaphore at offset sem_off of the peer's region sem_mem_id. */
typedef struct {
  int peer;
  pcl_transport_kind_t kind;
  uint32_t sem_mem_id;
  uint64_t sem_off;
} pcl_proxy_channel_t;

ncclResult_t pcl_proxy_create(const pcl_proxy_config_t *cfg, pcl_proxy_t **out);
/* Carries out every trigger already posted and flushes (producers must have stopped posting:
 * the kernels ended or were aborted; bounded by abort, an error or PLANCCL_BOOTSTRAP_TIMEOUT_S),
 * then stops the thread, disconnects, deregisters, frees. NULL ok. */
void pcl_proxy_destroy(pcl_proxy_t *p);
/* Called once per proxy, on the thread that saw it, with the proxy's first error (a send, a
 * copy, a receiver): the owner stops whatever waits for this proxy. fn NULL clears it; once
 * this returns, no call of the old fn runs any more. Set after an error not yet told, fn is
 * called at once. */
typedef void (*pcl_proxy_fail_fn)(void *arg, ncclResult_t res);
void pcl_proxy_on_fail(pcl_proxy_t *p, pcl_proxy_fail_fn fn, void *arg);
/* The communicator is aborted: sets the abort flag (the configuration's, else the proxy's own),
 * which ends the thread, a send it is stalled in, and the drain of a later destroy. */
void pcl_proxy_abort(pcl_proxy_t *p);

/* The descriptor kernels push triggers into. */
pcl_fifo_device_t pcl_proxy_fifo(const pcl_proxy_t *p);

/* Setup. Connections and channels: before pcl_proxy_start (read without locks by the proxy
 * thread). Memory: before or after start; an entry is published when complete. */

/* Pairwise with the peer (each rank connects its peers in increasing peer order). A connection
 * per (peer, kind); connecting twice is a no-op. */
ncclResult_t pcl_proxy_connect(pcl_proxy_t *p, int peer, pcl_transport_kind_t kind);
/* Registers a local region under `id` (< PCL_FIFO_MAX_MEMORIES) with every transport kind that
 * is connected, or that is named in kinds_mask (bit 1 << kind); fills *exp to send to peers. */
ncclResult_t pcl_proxy_mem_reg(pcl_proxy_t *p, uint32_t id, void *base, size_t size, int is_device,
                               uint32_t kinds_mask, pcl_mem_remote_t *exp);
/* Records what `peer` exported for its region `id` (for CE, remote->mapped must be the
 * peer-mapped address in this process). Once per (id, peer) while the proxy runs. */
ncclResult_t pcl_proxy_mem_set_remote(pcl_proxy_t *p, uint32_t id, int peer,
                                      const pcl_mem_remote_t *remote);
/* Copies what `peer` exported for region `id` into *out: 1 when recorded, else 0 (*out zeroed).
 * Not concurrent with pcl_proxy_mem_dereg of the same id. */
int pcl_proxy_mem_remote(const pcl_proxy_t *p, uint32_t id, int peer, pcl_mem_remote_t *out);
/* Withdraws region `id` (the caller guarantees no trigger naming it is queued or in flight). */
ncclResult_t pcl_proxy_mem_dereg(pcl_proxy_t *p, uint32_t id);
ncclResult_t pcl_proxy_channel_set(pcl_proxy_t *p, uint32_t channel_id,
                                   const pcl_proxy_channel_t *ch);

/* Starts the proxy thread (pinned near the GPU, cudaSetDevice, relaxed capture mode). */
ncclResult_t pcl_proxy_start(pcl_proxy_t *p);
/* First error the proxy thread hit (ncclSuccess while healthy); the thread stops consuming
 * triggers after an error, so GPU producers must poll the abort flag. */
ncclResult_t pcl_proxy_error(const pcl_proxy_t *p);
/* Triggers consumed so far (statistics/tests). */
uint64_t pcl_proxy_consumed(const pcl_proxy_t *p);
/* A kernel that pushes triggers into this proxy's FIFO has just been launched (any thread, no
 * lock; a relaxed-atomic add, plus one system call when the thread dozes): the thread polls hot
 * again, and leaves a long nap at once, so the launch's first trigger does not wait out a nap
 * that a quiet spell began. Replayed CUDA graphs announce nothing: their first trigger after a
 * quiet spell may wait up to 50 us. */
void pcl_proxy_expect(pcl_proxy_t *p);
/* Long naps cut short by pcl_proxy_expect, and whether the thread dozes now (tests, stats). */
uint64_t pcl_proxy_wakes(const pcl_proxy_t *p);
int pcl_proxy_dozing(const pcl_proxy_t *p);

/* One step of the proxy loop from the caller's thread, for tests driving a proxy without a
 * thread (pcl_proxy_start not called): returns 1 if it made progress. */
int pcl_proxy_poll_once(pcl_proxy_t *p);

#ifdef __cplusplus
}
#endif
#endif
