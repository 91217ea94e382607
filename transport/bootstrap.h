/* SPDX-License-Identifier: MIT
 * Bootstrap: the TCP rendezvous behind a unique id (root thread, ring all-gather), plus
 * broadcast, barrier, tagged point-to-point messages and split. Works across processes and
 * between threads of one process (ncclCommInitAll). */
#ifndef PCL_BOOTSTRAP_H
#define PCL_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#ifdef __cplusplus
extern "C" {
#endif

/* planccl's part of an ncclUniqueId: bytes 40..127 (bytes 0..39 may hold the real NCCL's id). */
#define PCL_BOOTSTRAP_HANDLE_BYTES 88
#define PCL_BOOTSTRAP_HANDLE_OFFSET 40

typedef struct {
  uint64_t magic;       /* random, nonzero; 0 means "no planccl bootstrap in this id" */
  uint8_t addr[28];     /* struct sockaddr_in or sockaddr_in6 of the root's listening socket */
  uint8_t reserved[52]; /* zero */
} pcl_bootstrap_handle_t;

#ifdef __cplusplus
static_assert(sizeof(pcl_bootstrap_handle_t) == PCL_BOOTSTRAP_HANDLE_BYTES, "handle size");
#else
_Static_assert(sizeof(pcl_bootstrap_handle_t) == PCL_BOOTSTRAP_HANDLE_BYTES, "handle size");
_Static_assert(PCL_BOOTSTRAP_HANDLE_OFFSET + PCL_BOOTSTRAP_HANDLE_BYTES == NCCL_UNIQUE_ID_BYTES,
               "handle fills the tail of ncclUniqueId");
#endif

typedef struct pcl_bootstrap pcl_bootstrap_t;

/* Picks the interface (PLANCCL_SOCKET_IFNAME, else the first non-loopback interface that is up,
 * else lo), listens on an ephemeral port and starts a detached root thread that serves exactly
 * one communicator (it exits once every rank got its ring successor, or on timeout). */
ncclResult_t pcl_bootstrap_root_create(pcl_bootstrap_handle_t *handle);

/* Number of root threads of this process still running (tests wait for 0 before counting
 * threads, fds and allocations). */
int pcl_bootstrap_roots_active(void);

/* 1 when the handle carries a planccl bootstrap (nonzero magic and a known address family). */
int pcl_bootstrap_handle_valid(const pcl_bootstrap_handle_t *handle);

/* Joins the communicator of `handle` as `rank` of `nranks`; blocks until every rank arrived and
 * the ring is connected. Every blocking step polls *abort_flag (may be NULL) and gives up after
 * PLANCCL_BOOTSTRAP_TIMEOUT_S with an error naming the step and the rank awaited. */
ncclResult_t pcl_bootstrap_create(const pcl_bootstrap_handle_t *handle, int rank, int nranks,
                                  volatile uint32_t *abort_flag, pcl_bootstrap_t **out);

/* Collectives over all ranks; every rank calls them in the same order. */
/* all = nranks slots of bytes_per_rank; the caller fills its own slot (rank * bytes_per_rank). */
ncclResult_t pcl_bootstrap_allgather(pcl_bootstrap_t *b, void *all, size_t bytes_per_rank);
ncclResult_t pcl_bootstrap_bcast(pcl_bootstrap_t *b, void *buf, size_t bytes, int root);
ncclResult_t pcl_bootstrap_barrier(pcl_bootstrap_t *b);

/* Tagged point-to-point messages. Messages between one (sender, receiver, tag) arrive in send
 * order; different tags or peers may be received in any order (unexpected ones are queued).
 * The receive size must equal the send size (a mismatch is an error). send may return before the
 * peer received. tag must be >= 0 (negative tags are reserved for internal use, and tags
 * >= 1 << 30 for transport connection setup: PCL_TRANSPORT_TAG_BASE in transport.h). */
ncclResult_t pcl_bootstrap_send(pcl_bootstrap_t *b, int peer, int tag, const void *buf,
                                size_t bytes);
ncclResult_t pcl_bootstrap_recv(pcl_bootstrap_t *b, int peer, int tag, void *buf, size_t bytes);

/* Collective over parent: ranks with the same color form a child ordered by (key, parent rank).
 * color NCCL_SPLIT_NOCOLOR (-1) gets *child = NULL. The children's traffic is independent of the
 * parent's (their own root and ring). */
ncclResult_t pcl_bootstrap_split(pcl_bootstrap_t *parent, int color, int key,
                                 pcl_bootstrap_t **child);

int pcl_bootstrap_rank(const pcl_bootstrap_t *b);
int pcl_bootstrap_nranks(const pcl_bootstrap_t *b);

/* Closes every socket and frees everything; never waits for peers. NULL is ok. */
void pcl_bootstrap_destroy(pcl_bootstrap_t *b);

#ifdef __cplusplus
}
#endif
#endif
