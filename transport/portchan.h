/* SPDX-License-Identifier: MIT
 * Port channels of one communicator: a proxy, one connection per peer over the transport the
 * caller chose, device semaphores the peers' proxies advance, and memory ids (scratch, semaphores,
 * collectively registered user buffers) that every rank assigns alike. */
#ifndef PCL_PORTCHAN_H
#define PCL_PORTCHAN_H
#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#ifdef __cplusplus
extern "C" {
#endif
#include "bootstrap.h"
#include "fifo.h"
#include "memchan.h"
#include "transport.h"

typedef struct pcl_portchan pcl_portchan_t;

#define PCL_PORTCHAN_MAX_CHANNELS 16 /* per peer; nranks x nchannels <= PCL_FIFO_MAX_CHANNELS */
#define PCL_PORTCHAN_MEM_SCRATCH 0u  /* memory ids, the same on every rank */
#define PCL_PORTCHAN_MEM_SEMS 1u
#define PCL_PORTCHAN_MEM_FIRST_USER 2u

typedef struct {
  int cuda_dev;
  const char *bus_id;  /* the GPU's PCI bus id: the proxy thread is pinned near it; may be NULL */
  int nchannels;       /* per connected peer, 1..PCL_PORTCHAN_MAX_CHANNELS */
  const uint8_t *kind; /* [nranks] pcl_transport_kind_t to each peer, NONE = no channels; must be
                          symmetric. NULL = the copy engine to every other rank. */
  /* Maps copy-engine peers' memory (semaphores, user buffers) into this process; required when
   * some kind is CE. Its scratch must be `scratch`. */
  pcl_memchan_t *memchan;
  void *scratch; /* device scratch exposed as PCL_PORTCHAN_MEM_SCRATCH; NULL = none */
  size_t scratch_bytes;
  volatile uint32_t *abort_flag; /* the communicator's; may be NULL */
} pcl_portchan_config_t;

/* One (peer, channel) as a kernel sees it. Protocol: a flag trigger on chan_id makes the peer's
 * proxy-side transport store the sender's running count into the peer's inbound word for
 * (me, channel) after the data of earlier triggers; wait = ++*local_expected, then acquire-poll
 * *local_inbound until >= it. Addresses are device addresses stored as integers. */
typedef struct {
  pcl_fifo_device_t fifo;
  uint64_t local_inbound;
  uint64_t local_expected;
  uint32_t chan_id;
} pcl_portchan_info_t;

/* Collective over all ranks of b: creates the proxy, connects the peers (increasing order),
 * allocates the semaphores, registers scratch and semaphores, exchanges descriptors, sets the
 * channels and starts the proxy thread. Every rank succeeds or every rank fails. b must outlive
 * the port channels. */
ncclResult_t pcl_portchan_create(pcl_bootstrap_t *b, const pcl_portchan_config_t *cfg,
                                 pcl_portchan_t **out);
/* Local: carries out the transfers already posted (a peer may still wait for the last signal;
 * this waits at most for its socket to take them, unless aborted), stops the proxy, frees
 * everything. Kernels using the channels must have finished or been aborted. NULL is ok. */
void pcl_portchan_destroy(pcl_portchan_t *pc);
/* Called once, on a transport thread, with the port channels' first error (the proxy stops
 * for good then); NULL clears it, and once that returns no call of the old fn runs any more.
 * Set after an error, fn is called at once. */
typedef void (*pcl_portchan_fail_fn)(void *arg, ncclResult_t res);
void pcl_portchan_on_fail(pcl_portchan_t *pc, pcl_portchan_fail_fn fn, void *arg);
/* Aborted: the destroy that follows drops the transfers still posted (pcl_proxy_abort). */
void pcl_portchan_abort(pcl_portchan_t *pc);

int pcl_portchan_connected(const pcl_portchan_t *pc, int peer);
int pcl_portchan_nchannels(const pcl_portchan_t *pc);
pcl_transport_kind_t pcl_portchan_kind(const pcl_portchan_t *pc, int peer);
ncclResult_t pcl_portchan_info(const pcl_portchan_t *pc, int peer, int channel,
                               pcl_portchan_info_t *out);
/* Bytes that connected `peer` exposes under memory id `id` (its scratch size for
 * PCL_PORTCHAN_MEM_SCRATCH), 0 when it exposes nothing there or is not connected. Ranks may size
 * their scratch differently: port offsets into a peer's double-buffered scratch need its half. */
uint64_t pcl_portchan_remote_bytes(const pcl_portchan_t *pc, uint32_t id, int peer);
/* The proxy's first error (ncclSuccess while healthy). */
ncclResult_t pcl_portchan_error(const pcl_portchan_t *pc);
/* A kernel that uses these channels is being launched: the proxy polls hot for its triggers
 * (pcl_proxy_expect). */
void pcl_portchan_expect(pcl_portchan_t *pc);

/* Collective like create: every rank registers its own [ptr, ptr + bytes) of device memory (host
 * memory when the port channels have no GPU)
 * (NULL/0 = nothing) under the next user memory id, the same on every rank, and learns the
 * peers'. `mapped` (may be NULL when no peer is reached by CE) is the memory-channel registration
 * of the same buffer, which holds the CE peers' mappings. All ranks succeed or all fail. */
ncclResult_t pcl_portchan_buf_reg(pcl_portchan_t *pc, void *ptr, size_t bytes,
                                  const pcl_memchan_buf_t *mapped, uint32_t *id);
/* Local: withdraws a user memory id. No trigger naming it may be queued or in flight on ANY rank
 * (a peer's TCP receiver resolves ids as data arrives): call it after the kernels that used it
 * finished everywhere, e.g. behind a barrier. Ids are not reused. */
void pcl_portchan_buf_release(pcl_portchan_t *pc, uint32_t id);

#ifdef __cplusplus
}
#endif
#endif
