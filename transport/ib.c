/* SPDX-License-Identifier: MIT
 * InfiniBand / RoCE transport: the first active port, one PD and CQ per proxy, one RC QP per
 * peer (INIT -> RTR -> RTS with LID/GID/QPN/PSN exchanged over the bootstrap), RDMA write for
 * puts, atomic fetch-add for signals, dma-buf registration of GPU memory where available. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "pcl_abort.h"
#include "alloc.h"
#include "ib_int.h"
#include "log.h"
#include "pcl_check.h"
#include "transport.h"

#define IB_TAG (PCL_TRANSPORT_TAG_BASE + 3)
#define IB_SQ_DEPTH 512
#define IB_MAX_WRITE (1ull << 30)
#define IB_ACCESS                                                                                  \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                     \
   IBV_ACCESS_REMOTE_ATOMIC)

/* ---- discovery ---- */

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int dev_count;
static char first_dev[64];
static int first_port;

static void count_devices(void) {
  struct ibv_device **list = NULL;
  int n = 0;
  if (!pcl_ibv_available() || pcl_ibv_get_device_list(&list, &n) != ncclSuccess)
    return;
  for (int i = 0; i < n; i++) {
    struct ibv_context *ctx = NULL;
    struct ibv_device_attr da;
    if (pcl_ibv_open_device(list[i], &ctx) != ncclSuccess)
      continue;
    int usable = 0;
    if (pcl_ibv_query_device(ctx, &da) == ncclSuccess) {
      for (int p = 1; p <= da.phys_port_cnt; p++) {
        struct ibv_port_attr pa;
        if (pcl_ibv_query_port(ctx, (uint8_t)p, &pa) != ncclSuccess)
          continue;
        if (pa.state != IBV_PORT_ACTIVE)
          continue;
        if (!usable && dev_count == 0) {
          snprintf(first_dev, sizeof(first_dev), "%s", pcl_ibv_get_device_name(list[i]));
          first_port = p;
        }
        usable = 1;
      }
    }
    pcl_ibv_close_device(ctx);
    dev_count += usable;
  }
  pcl_ibv_free_device_list(list);
  PCL_INFO(PCL_LOG_IB, "ib: %d usable device(s)%s%s", dev_count, dev_count ? ", first " : "",
           first_dev);
}

int pcl_ib_device_count(void) {
  pthread_once(&count_once, count_devices);
  return dev_count;
}

/* ---- context ---- */

typedef struct {
  struct ibv_context *dev;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  uint8_t port;
  uint16_t lid;
  int gid_index; /* -1: no GRH (InfiniBand with a LID) */
  union ibv_gid gid;
  enum ibv_mtu mtu;
  uint64_t *scratch; /* fetch-add results land here (never read) */
  struct ibv_mr *scratch_mr;
} ib_ctx_t;

/* What each side of a QP tells the other. */
typedef struct {
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t mtu, has_gid;
  uint8_t gid[16];
} ib_qp_info_t;

typedef struct {
  ib_ctx_t *ib;
  pcl_transport_ctx_t *ctx;
  int peer;
  struct ibv_qp *qp;
  int outstanding; /* signaled work requests not yet completed */
} ib_conn_t;

static void ib_fini(pcl_transport_ctx_t *ctx) {
  ib_ctx_t *ib = ctx->priv[PCL_TRANSPORT_IB];
  if (ib == NULL)
    return;
  pcl_ibv_dereg_mr(ib->scratch_mr);
  free(ib->scratch);
  pcl_ibv_destroy_cq(ib->cq);
  pcl_ibv_dealloc_pd(ib->pd);
  pcl_ibv_close_device(ib->dev);
  pcl_free(ib);
  ctx->priv[PCL_TRANSPORT_IB] = NULL;
}

/* RoCE needs a GID: prefer an IPv4-mapped one (RoCE v2 over IPv4), else the first nonzero. */
static void pick_gid(ib_ctx_t *ib, int table_len) {
  int best = -1;
  for (int i = 0; i < table_len && i < 32; i++) {
    union ibv_gid g;
    if (pcl_ibv_query_gid(ib->dev, ib->port, i, &g) != ncclSuccess)
      break;
    static const uint8_t zero[16];
    if (memcmp(g.raw, zero, 16) == 0)
      continue;
    int v4 = memcmp(g.raw, zero, 10) == 0 && g.raw[10] == 0xff && g.raw[11] == 0xff;
    if (best < 0 || v4) {
      best = i;
      ib->gid = g;
      if (v4)
        break;
    }
  }
  ib->gid_index = best;
}

static ncclResult_t ib_init(pcl_transport_ctx_t *ctx) {
  ncclResult_t res = ncclSuccess;
  struct ibv_device **list = NULL;
  int n = 0;
  ib_ctx_t *ib = NULL;
  if (pcl_ib_device_count() == 0) {
    PCL_WARN(PCL_LOG_IB, "ib: no usable InfiniBand/RoCE device");
    return ncclSystemError;
  }
  PCL_CALLOC(ib, 1, "ib context");
  if (ib == NULL)
    return ncclSystemError;
  ctx->priv[PCL_TRANSPORT_IB] = ib;
  PCL_CHECK_GOTO(pcl_ibv_get_device_list(&list, &n), res, err);
  for (int i = 0; i < n && ib->dev == NULL; i++)
    if (strcmp(pcl_ibv_get_device_name(list[i]), first_dev) == 0)
      PCL_CHECK_GOTO(pcl_ibv_open_device(list[i], &ib->dev), res, err);
  if (ib->dev == NULL) {
    PCL_WARN(PCL_LOG_IB, "ib: device %s disappeared", first_dev);
    res = ncclSystemError;
    goto err;
  }
  ib->port = (uint8_t)first_port;
  struct ibv_port_attr pa;
  PCL_CHECK_GOTO(pcl_ibv_query_port(ib->dev, ib->port, &pa), res, err);
  ib->lid = pa.lid;
  ib->mtu = pa.active_mtu;
  ib->gid_index = -1;
  if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || pa.lid == 0)
    pick_gid(ib, pa.gid_tbl_len);
  PCL_CHECK_GOTO(pcl_ibv_alloc_pd(ib->dev, &ib->pd), res, err);
  PCL_CHECK_GOTO(pcl_ibv_create_cq(ib->dev, 4096, &ib->cq), res, err);
  if (posix_memalign((void **)&ib->scratch, 4096, 4096) != 0) {
    PCL_WARN(PCL_LOG_IB, "ib: out of memory");
    res = ncclSystemError;
    goto err;
  }
  PCL_CHECK_GOTO(pcl_ibv_reg_mr(ib->pd, ib->scratch, 4096, IB_ACCESS, &ib->scratch_mr), res, err);
  pcl_ibv_free_device_list(list);
  PCL_INFO(PCL_LOG_IB, "ib: using %s port %u (lid %u, gid index %d, mtu %d)", first_dev, ib->port,
           ib->lid, ib->gid_index, (int)ib->mtu);
  return ncclSuccess;
err:
  pcl_ibv_free_device_list(list);
  ib_fini(ctx);
  return res;
}

/* ---- queue pairs ---- */

static ncclResult_t qp_to_init(ib_conn_t *c) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = c->ib->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return pcl_ibv_modify_qp(
      c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

static ncclResult_t qp_to_rtr(ib_conn_t *c, const ib_qp_info_t *r) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = (enum ibv_mtu)(r->mtu < c->ib->mtu ? r->mtu : c->ib->mtu);
  a.dest_qp_num = r->qpn;
  a.rq_psn = r->psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = r->lid;
  a.ah_attr.sl = 0;
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.port_num = c->ib->port;
  if (r->has_gid && c->ib->gid_index >= 0) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)c->ib->gid_index;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.flow_label = 0;
    a.ah_attr.grh.traffic_class = 0;
  }
  return pcl_ibv_modify_qp(c->qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                           "RTR");
}

static ncclResult_t qp_to_rts(ib_conn_t *c, uint32_t psn) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof(a));
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = psn;
  a.max_rd_atomic = 1;
  return pcl_ibv_modify_qp(c->qp, &a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                           "RTS");
}

static void ib_disconnect(pcl_transport_ctx_t *ctx, void *conn) {
  ib_conn_t *c = conn;
  if (c == NULL)
    return;
  pcl_ibv_destroy_qp(c->qp);
  pcl_free(c);
}

static ncclResult_t ib_connect(pcl_transport_ctx_t *ctx, int peer, void **out) {
  ncclResult_t res = ncclSuccess;
  ib_conn_t *c = NULL;
  PCL_CALLOC(c, 1, "ib connection");
  if (c == NULL)
    return ncclSystemError;
  c->ib = ctx->priv[PCL_TRANSPORT_IB];
  c->ctx = ctx;
  c->peer = peer;
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof(qa));
  qa.send_cq = c->ib->cq;
  qa.recv_cq = c->ib->cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = IB_SQ_DEPTH;
  qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  PCL_CHECK_GOTO(pcl_ibv_create_qp(c->ib->pd, &qa, &c->qp), res, err);
  PCL_CHECK_GOTO(qp_to_init(c), res, err);
  ib_qp_info_t me, them;
  memset(&me, 0, sizeof(me));
  uint32_t psn = 0;
  if (getrandom(&psn, sizeof(psn), 0) != (ssize_t)sizeof(psn))
    psn = (uint32_t)getpid();
  me.qpn = c->qp->qp_num;
  me.psn = psn & 0xffffff;
  me.lid = c->ib->lid;
  me.mtu = (uint8_t)c->ib->mtu;
  me.has_gid = c->ib->gid_index >= 0;
  memcpy(me.gid, c->ib->gid.raw, 16);
  /* Small messages: sending first on both sides cannot block. */
  PCL_CHECK_GOTO(pcl_bootstrap_send(ctx->bootstrap, peer, IB_TAG, &me, sizeof(me)), res, err);
  PCL_CHECK_GOTO(pcl_bootstrap_recv(ctx->bootstrap, peer, IB_TAG, &them, sizeof(them)), res, err);
  PCL_CHECK_GOTO(qp_to_rtr(c, &them), res, err);
  PCL_CHECK_GOTO(qp_to_rts(c, me.psn), res, err);
  PCL_INFO(PCL_LOG_IB, "ib rank %d: qp 0x%x connected to rank %d qp 0x%x", ctx->rank, me.qpn, peer,
           them.qpn);
  *out = c;
  return ncclSuccess;
err:
  ib_disconnect(ctx, c);
  return res;
}

/* ---- memory ---- */

typedef CUresult (*get_handle_fn_t)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                    unsigned long long);

static pthread_once_t dmabuf_once = PTHREAD_ONCE_INIT;
static get_handle_fn_t dmabuf_get_handle;

/* Driver API only through the runtime's entry-point query: libcuda is never linked. */
static void dmabuf_init(void) {
  void *p = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &p, 12000,
                                       cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    p = NULL;
  }
  dmabuf_get_handle = (get_handle_fn_t)p;
}

static get_handle_fn_t dmabuf_fn(void) {
  pthread_once(&dmabuf_once, dmabuf_init);
  return dmabuf_get_handle;
}

static ncclResult_t ib_mem_reg(pcl_transport_ctx_t *ctx, pcl_mem_local_t *m,
                               pcl_mem_remote_t *exp) {
  ib_ctx_t *ib = ctx->priv[PCL_TRANSPORT_IB];
  struct ibv_mr *mr = NULL;
  if (m->is_device) {
    get_handle_fn_t f = dmabuf_fn();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)m->base & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)m->base + m->size + page - 1) & ~(uintptr_t)(page - 1);
    int fd = -1;
    if (f != NULL &&
        f(&fd, (CUdeviceptr)lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) == CUDA_SUCCESS) {
      PCL_CHECK(pcl_ibv_reg_dmabuf_mr(ib->pd, 0, hi - lo, lo, fd, IB_ACCESS, &mr));
      close(fd);
    }
  }
  if (mr == NULL)
    PCL_CHECK(pcl_ibv_reg_mr(ib->pd, m->base, m->size, IB_ACCESS, &mr));
  m->reg[PCL_TRANSPORT_IB] = mr;
  exp->rkey = mr->rkey;
  return ncclSuccess;
}

static void ib_mem_dereg(pcl_transport_ctx_t *ctx, pcl_mem_local_t *m) {
  pcl_ibv_dereg_mr(m->reg[PCL_TRANSPORT_IB]);
  m->reg[PCL_TRANSPORT_IB] = NULL;
}

/* ---- data path ---- */

/* Drains completions; a failed one is reported with its status. Completions of every
 * connection share the CQ: each carries its connection in wr_id. */
static ncclResult_t drain_cq(ib_ctx_t *ib) {
  struct ibv_wc wc[16];
  for (;;) {
    int n = 0;
    PCL_CHECK(pcl_ibv_poll_cq(ib->cq, 16, wc, &n));
    if (n == 0)
      return ncclSuccess;
    for (int i = 0; i < n; i++) {
      ib_conn_t *c = (ib_conn_t *)(uintptr_t)wc[i].wr_id;
      if (wc[i].status != IBV_WC_SUCCESS) {
        PCL_WARN(PCL_LOG_IB, "ib rank %d: work request to rank %d failed: %s (vendor error 0x%x)",
                 c->ctx->rank, c->peer, pcl_ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
        return ncclRemoteError;
      }
      c->outstanding--;
    }
  }
}

static ncclResult_t post(ib_conn_t *c, struct ibv_send_wr *wr) {
  while (c->outstanding >= IB_SQ_DEPTH) {
    PCL_CHECK(drain_cq(c->ib));
    if (pcl_abort_requested(c->ctx->abort_flag))
      return ncclInternalError;
  }
  wr->wr_id = (uint64_t)(uintptr_t)c;
  wr->send_flags |= IBV_SEND_SIGNALED;
  PCL_CHECK(pcl_ibv_post_send(c->qp, wr));
  c->outstanding++;
  return ncclSuccess;
}

static ncclResult_t ib_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                           const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  ib_conn_t *c = conn;
  struct ibv_mr *mr = src->reg[PCL_TRANSPORT_IB];
  if (mr == NULL) {
    PCL_WARN(PCL_LOG_IB, "ib: memory %u is not registered with the IB transport", src->id);
    return ncclInvalidUsage;
  }
  for (uint64_t done = 0; done < bytes || (bytes == 0 && done == 0);) {
    uint64_t n = bytes - done < IB_MAX_WRITE ? bytes - done : IB_MAX_WRITE;
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)src->base + so + done,
                          .length = (uint32_t)n,
                          .lkey = mr->lkey};
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = dst->addr + doff + done;
    wr.wr.rdma.rkey = dst->rkey;
    PCL_CHECK(post(c, &wr));
    done += n;
    if (bytes == 0)
      break;
  }
  return ncclSuccess;
}

static ncclResult_t ib_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                              uint64_t value) {
  ib_conn_t *c = conn;
  uint64_t addr = dst->addr + off;
  if (addr & 7) {
    PCL_WARN(PCL_LOG_IB, "ib: semaphore at 0x%llx is not 8-byte aligned", (unsigned long long)addr);
    return ncclInvalidUsage;
  }
  struct ibv_sge sge = {
      .addr = (uint64_t)(uintptr_t)c->ib->scratch, .length = 8, .lkey = c->ib->scratch_mr->lkey};
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof(wr));
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.atomic.remote_addr = addr;
  wr.wr.atomic.rkey = dst->rkey;
  wr.wr.atomic.compare_add = 1; /* one sender per semaphore: +1 reaches `value` */
  return post(c, &wr);
}

static ncclResult_t ib_flush(void *conn, int *done) {
  ib_conn_t *c = conn;
  PCL_CHECK(drain_cq(c->ib));
  *done = c->outstanding == 0;
  return ncclSuccess;
}

static ncclResult_t ib_progress(void *conn) {
  return drain_cq(((ib_conn_t *)conn)->ib);
}

const struct pcl_transport_ops pcl_transport_ib_ops = {
    .name = "ib",
    .init = ib_init,
    .fini = ib_fini,
    .connect = ib_connect,
    .disconnect = ib_disconnect,
    .mem_reg = ib_mem_reg,
    .mem_dereg = ib_mem_dereg,
    .put = ib_put,
    .signal = ib_signal,
    .flush = ib_flush,
    .progress = ib_progress,
};
