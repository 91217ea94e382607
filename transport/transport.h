/* SPDX-License-Identifier: MIT
 * The provider contract behind port channels: what a transport (copy engine, TCP, InfiniBand
 * verbs, or a test fake) implements, the memory descriptors it works on, and the per-peer
 * choice. Ops tables are filled by field name and overlaid on stubs returning ncclInvalidUsage. */
#ifndef PCL_TRANSPORT_H
#define PCL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "bootstrap.h"
#include "topo.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  PCL_TRANSPORT_NONE = 0,
  PCL_TRANSPORT_CE = 1,       /* copy engine: cudaMemcpyAsync into a peer-mapped pointer */
  PCL_TRANSPORT_TCP = 2,      /* sockets, staged through host memory */
  PCL_TRANSPORT_IB = 3,       /* InfiniBand / RoCE verbs: RC QPs, RDMA write, atomics */
  PCL_TRANSPORT_LOOPBACK = 4, /* reserved for tests (pcl_transport_register) */
  PCL_TRANSPORT_COUNT
} pcl_transport_kind_t;

/* A region registered with a proxy, as the local side sees it. */
typedef struct {
  uint32_t id;   /* memory id (what triggers name) */
  int is_device; /* 1: GPU memory of the proxy's device; 0: host memory */
  void *base;
  size_t size;
  void *reg[PCL_TRANSPORT_COUNT]; /* per-transport registration (e.g. the IB memory region) */
} pcl_mem_local_t;

/* What the owner exports for one region (exchanged over the bootstrap, 64 bytes), completed by
 * the importer: `mapped` is the region's address in the importer's process for the copy engine
 * (set by the GPU-memory module after a CUDA IPC import, or the same pointer inside one
 * process); it is meaningless on the wire. */
typedef struct {
  uint64_t addr; /* owner's virtual address (IB: the RDMA address) */
  uint64_t size;
  uint32_t rkey;   /* IB */
  uint32_t mem_id; /* memory id on the owner (TCP: the receiver resolves it) */
  uint32_t is_device;
  uint32_t pad;
  uint64_t mapped; /* CE: peer-mapped pointer in the importer's process, 0 if none */
  uint8_t reserved[24];
} pcl_mem_remote_t;
#ifdef __cplusplus
static_assert(sizeof(pcl_mem_remote_t) == 64, "remote memory descriptor layout");
#else
_Static_assert(sizeof(pcl_mem_remote_t) == 64, "remote memory descriptor layout");
#endif

/* Per-proxy state shared with the transports. */
typedef struct pcl_transport_ctx {
  int rank, nranks;
  int cuda_dev;                  /* -1: no GPU (CPU tests) */
  pcl_bootstrap_t *bootstrap;    /* for connection setup only, from the creating thread */
  volatile uint32_t *abort_flag; /* may be NULL */
  /* Resolves a local memory id for receivers (TCP); the table is frozen while traffic flows. */
  const pcl_mem_local_t *(*lookup)(void *owner, uint32_t mem_id);
  /* A transport's own thread (a TCP receiver) failed for good: the owner records res as its
   * error (pcl_proxy_error, then the communicator's asynchronous error). Any thread. */
  void (*failed)(void *owner, ncclResult_t res);
  void *owner;
  void *priv[PCL_TRANSPORT_COUNT]; /* per-transport state created by init */
} pcl_transport_ctx_t;

/* Bootstrap tags at or above this value are reserved for transport connection setup. */
#define PCL_TRANSPORT_TAG_BASE (1 << 30)

/* Every op returns ncclResult_t and logs its own failures. Ordering contract: puts and signals
 * issued on one connection take effect at the destination in issue order (a signal is visible
 * only after every earlier put's data); flush reports done once everything issued so far is
 * complete (the sources may be reused; for CE/IB the data is at the destination). */
struct pcl_transport_ops {
  const char *name;
  /* Once per context, before the first connect (optional: default does nothing). */
  ncclResult_t (*init)(pcl_transport_ctx_t *ctx);
  void (*fini)(pcl_transport_ctx_t *ctx);
  /* Pairwise: rank and peer both call it (each rank connects its peers in increasing order). */
  ncclResult_t (*connect)(pcl_transport_ctx_t *ctx, int peer, void **conn);
  void (*disconnect)(pcl_transport_ctx_t *ctx, void *conn);
  /* Registers a local region for this transport, filling the parts of exp it owns. */
  ncclResult_t (*mem_reg)(pcl_transport_ctx_t *ctx, pcl_mem_local_t *mem, pcl_mem_remote_t *exp);
  void (*mem_dereg)(pcl_transport_ctx_t *ctx, pcl_mem_local_t *mem);
  ncclResult_t (*put)(void *conn, const pcl_mem_local_t *src, uint64_t src_off,
                      const pcl_mem_remote_t *dst, uint64_t dst_off, uint64_t bytes);
  /* The peer's 64-bit semaphore at dst+off becomes >= value (value = this sender's signal count
   * on that semaphore; a transport may add 1 instead of storing value: one sender each). */
  ncclResult_t (*signal)(void *conn, const pcl_mem_remote_t *dst, uint64_t off, uint64_t value);
  /* Non-blocking: *done = 1 when everything issued on conn is complete (default: always). */
  ncclResult_t (*flush)(void *conn, int *done);
  /* Called from the proxy loop (default: nothing). */
  ncclResult_t (*progress)(void *conn);
};

/* The ops of a kind, never NULL, every field callable (stubs for what the transport lacks). */
const struct pcl_transport_ops *pcl_transport_get(pcl_transport_kind_t kind);
/* Replaces a kind's ops (tests register a fake under PCL_TRANSPORT_LOOPBACK); NULL restores. */
void pcl_transport_register(pcl_transport_kind_t kind, const struct pcl_transport_ops *ops);
const char *pcl_transport_name(pcl_transport_kind_t kind);

/* The transport between ranks a and b (same answer on both sides): CE when both GPUs can map
 * each other's memory (same host), else IB when an HCA is usable here, else TCP. Logged once per
 * pair at INFO. */
pcl_transport_kind_t pcl_transport_choose(const pcl_topo_t *topo, int a, int b);

/* Built-in providers (defined in ce.c, tcp.c, ib.c). */
extern const struct pcl_transport_ops pcl_transport_ce_ops;
extern const struct pcl_transport_ops pcl_transport_tcp_ops;
extern const struct pcl_transport_ops pcl_transport_ib_ops;

/* Number of usable IB devices (0 without libibverbs or HCAs); from ib.c. */
int pcl_ib_device_count(void);

#ifdef __cplusplus
}
#endif
#endif
