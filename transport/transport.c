/* SPDX-License-Identifier: MIT
 * Transport registry: overlays each provider's ops on stubs that fail with ncclInvalidUsage (or
 * do nothing, for the optional hooks), and chooses the transport between two ranks. */
#include "transport.h"

#include <pthread.h>
#include <string.h>

#include "log.h"

static ncclResult_t stub_init(pcl_transport_ctx_t *ctx) {
  return ncclSuccess;
}
static void stub_fini(pcl_transport_ctx_t *ctx) {}
static ncclResult_t stub_connect(pcl_transport_ctx_t *ctx, int peer, void **conn) {
  PCL_WARN(PCL_LOG_PORT, "transport: connect unsupported by this transport");
  return ncclInvalidUsage;
}
static void stub_disconnect(pcl_transport_ctx_t *ctx, void *conn) {}
static ncclResult_t stub_mem_reg(pcl_transport_ctx_t *ctx, pcl_mem_local_t *m,
                                 pcl_mem_remote_t *exp) {
  return ncclSuccess; /* nothing to register: the generic fields are filled by the proxy */
}
static void stub_mem_dereg(pcl_transport_ctx_t *ctx, pcl_mem_local_t *m) {}
static ncclResult_t stub_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                             const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  PCL_WARN(PCL_LOG_PORT, "transport: put unsupported by this transport");
  return ncclInvalidUsage;
}
static ncclResult_t stub_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                                uint64_t value) {
  PCL_WARN(PCL_LOG_PORT, "transport: signal unsupported by this transport");
  return ncclInvalidUsage;
}
static ncclResult_t stub_flush(void *conn, int *done) {
  *done = 1;
  return ncclSuccess;
}
static ncclResult_t stub_progress(void *conn) {
  return ncclSuccess;
}

static const struct pcl_transport_ops stubs = {
    .name = "none",
    .init = stub_init,
    .fini = stub_fini,
    .connect = stub_connect,
    .disconnect = stub_disconnect,
    .mem_reg = stub_mem_reg,
    .mem_dereg = stub_mem_dereg,
    .put = stub_put,
    .signal = stub_signal,
    .flush = stub_flush,
    .progress = stub_progress,
};

static struct pcl_transport_ops table[PCL_TRANSPORT_COUNT];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void overlay(struct pcl_transport_ops *dst, const struct pcl_transport_ops *src) {
  *dst = stubs;
  if (src == NULL)
    return;
#define PCL_OVERLAY(f)                                                                             \
  if (src->f)                                                                                      \
    dst->f = src->f;
  PCL_OVERLAY(name)
  PCL_OVERLAY(init)
  PCL_OVERLAY(fini)
  PCL_OVERLAY(connect)
  PCL_OVERLAY(disconnect)
  PCL_OVERLAY(mem_reg)
  PCL_OVERLAY(mem_dereg)
  PCL_OVERLAY(put)
  PCL_OVERLAY(signal)
  PCL_OVERLAY(flush)
  PCL_OVERLAY(progress)
#undef PCL_OVERLAY
}

static const struct pcl_transport_ops *builtin(pcl_transport_kind_t k) {
  switch (k) {
  case PCL_TRANSPORT_CE:
    return &pcl_transport_ce_ops;
  case PCL_TRANSPORT_TCP:
    return &pcl_transport_tcp_ops;
  case PCL_TRANSPORT_IB:
    return &pcl_transport_ib_ops;
  default:
    return NULL;
  }
}

static void table_init(void) {
  for (int k = 0; k < PCL_TRANSPORT_COUNT; k++)
    overlay(&table[k], builtin((pcl_transport_kind_t)k));
}

const struct pcl_transport_ops *pcl_transport_get(pcl_transport_kind_t kind) {
  pthread_once(&table_once, table_init);
  if ((int)kind < 0 || kind >= PCL_TRANSPORT_COUNT)
    return &table[PCL_TRANSPORT_NONE];
  return &table[kind];
}

void pcl_transport_register(pcl_transport_kind_t kind, const struct pcl_transport_ops *ops) {
  pthread_once(&table_once, table_init);
  if ((int)kind <= 0 || kind >= PCL_TRANSPORT_COUNT)
    return;
  pthread_mutex_lock(&table_lock);
  overlay(&table[kind], ops != NULL ? ops : builtin(kind));
  pthread_mutex_unlock(&table_lock);
}

const char *pcl_transport_name(pcl_transport_kind_t kind) {
  static const char *names[PCL_TRANSPORT_COUNT] = {"none", "ce", "tcp", "ib", "loopback"};
  return ((int)kind >= 0 && kind < PCL_TRANSPORT_COUNT) ? names[kind] : "?";
}

pcl_transport_kind_t pcl_transport_choose(const pcl_topo_t *topo, int a, int b) {
  pcl_transport_kind_t k;
  const char *why;
  if (pcl_topo_peer_access(topo, a, b) && pcl_topo_peer_access(topo, b, a)) {
    k = PCL_TRANSPORT_CE;
    why = "GPUs can map each other's memory";
  } else if (pcl_topo_rank_info(topo, a)->ib_devices > 0 &&
             pcl_topo_rank_info(topo, b)->ib_devices > 0) {
    k = PCL_TRANSPORT_IB;
    why = pcl_topo_same_host(topo, a, b) ? "same host without peer access, HCA present"
                                         : "different hosts, HCA present";
  } else {
    k = PCL_TRANSPORT_TCP;
    why = pcl_topo_same_host(topo, a, b) ? "same host without peer access, no HCA"
                                         : "different hosts, no HCA";
  }
  PCL_INFO(PCL_LOG_PORT, "transport: ranks %d <-> %d use %s (%s)", a, b, pcl_transport_name(k),
           why);
  return k;
}
