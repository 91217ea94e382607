/* SPDX-License-Identifier: MIT
 * Copy-engine transport (same node): puts are cudaMemcpyAsync into the peer-mapped pointer on a
 * proxy-owned stream; signals copy the new counter value from a ring of pinned host slots on the
 * same stream (so they land after the data); flush = an event query. */
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "transport.h"

#define SIGNAL_SLOTS 256

typedef struct {
  cudaStream_t stream;
  uint64_t *slots; /* pinned: one value per in-flight signal */
  cudaEvent_t slot_ev[SIGNAL_SLOTS];
  uint8_t slot_busy[SIGNAL_SLOTS];
  uint64_t next_slot;
  cudaEvent_t flush_ev;
  int dirty; /* work issued since the last flush event */
  int flush_pending;
} ce_ctx_t;

typedef struct {
  pcl_transport_ctx_t *ctx;
  ce_ctx_t *ce;
  int peer;
} ce_conn_t;

static void ce_fini(pcl_transport_ctx_t *ctx) {
  ce_ctx_t *ce = ctx->priv[PCL_TRANSPORT_CE];
  if (ce == NULL)
    return;
  if (ce->stream) {
    cudaError_t e = cudaStreamSynchronize(ce->stream);
    if (e != cudaSuccess)
      PCL_WARN(PCL_LOG_PORT, "ce: stream sync at teardown: %s", cudaGetErrorString(e));
    cudaStreamDestroy(ce->stream);
  }
  for (int i = 0; i < SIGNAL_SLOTS; i++)
    if (ce->slot_ev[i])
      cudaEventDestroy(ce->slot_ev[i]);
  if (ce->flush_ev)
    cudaEventDestroy(ce->flush_ev);
  if (ce->slots)
    cudaFreeHost(ce->slots);
  pcl_free(ce);
  ctx->priv[PCL_TRANSPORT_CE] = NULL;
}

static ncclResult_t ce_init(pcl_transport_ctx_t *ctx) {
  ncclResult_t res = ncclSuccess;
  ce_ctx_t *ce = NULL;
  if (ctx->cuda_dev < 0) {
    PCL_WARN(PCL_LOG_PORT, "ce: the copy-engine transport needs a GPU");
    return ncclInvalidUsage;
  }
  PCL_CALLOC(ce, 1, "ce context");
  if (ce == NULL)
    return ncclSystemError;
  ctx->priv[PCL_TRANSPORT_CE] = ce;
  PCL_CUDA_CHECK_GOTO(cudaSetDevice(ctx->cuda_dev), res, err);
  PCL_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&ce->stream, cudaStreamNonBlocking), res, err);
  PCL_CUDA_CHECK_GOTO(cudaHostAlloc((void **)&ce->slots, SIGNAL_SLOTS * sizeof(uint64_t), 0), res,
                      err);
  for (int i = 0; i < SIGNAL_SLOTS; i++)
    PCL_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&ce->slot_ev[i], cudaEventDisableTiming), res,
                        err);
  PCL_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&ce->flush_ev, cudaEventDisableTiming), res, err);
  return ncclSuccess;
err:
  ce_fini(ctx);
  return res;
}

static ncclResult_t ce_connect(pcl_transport_ctx_t *ctx, int peer, void **out) {
  ce_conn_t *c;
  PCL_CALLOC(c, 1, "ce connection");
  if (c == NULL)
    return ncclSystemError;
  c->ctx = ctx;
  c->ce = ctx->priv[PCL_TRANSPORT_CE];
  c->peer = peer;
  *out = c;
  return ncclSuccess;
}

static void ce_disconnect(pcl_transport_ctx_t *ctx, void *conn) {
  pcl_free(conn);
}

static ncclResult_t ce_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                           const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  ce_conn_t *c = conn;
  if (dst->mapped == 0) {
    PCL_WARN(PCL_LOG_PORT, "ce: memory %u of rank %d is not mapped in this process", dst->mem_id,
             c->peer);
    return ncclInvalidUsage;
  }
  PCL_CUDA_CHECK(cudaMemcpyAsync((char *)(uintptr_t)dst->mapped + doff,
                                 (const char *)src->base + so, bytes, cudaMemcpyDefault,
                                 c->ce->stream));
  c->ce->dirty = 1;
  return ncclSuccess;
}

static ncclResult_t ce_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                              uint64_t value) {
  ce_conn_t *c = conn;
  ce_ctx_t *ce = c->ce;
  if (dst->mapped == 0) {
    PCL_WARN(PCL_LOG_PORT, "ce: semaphore memory %u of rank %d is not mapped in this process",
             dst->mem_id, c->peer);
    return ncclInvalidUsage;
  }
  /* Each in-flight signal owns a slot until its copy ran: reusing a slot early would let an
   * older copy publish a newer (larger) value before the data it covers. */
  int s = (int)(ce->next_slot++ % SIGNAL_SLOTS);
  if (ce->slot_busy[s])
    PCL_CUDA_CHECK(cudaEventSynchronize(ce->slot_ev[s]));
  ce->slots[s] = value;
  PCL_CUDA_CHECK(cudaMemcpyAsync((char *)(uintptr_t)dst->mapped + off, &ce->slots[s],
                                 sizeof(uint64_t), cudaMemcpyHostToDevice, ce->stream));
  PCL_CUDA_CHECK(cudaEventRecord(ce->slot_ev[s], ce->stream));
  ce->slot_busy[s] = 1;
  ce->dirty = 1;
  return ncclSuccess;
}

static ncclResult_t ce_flush(void *conn, int *done) {
  ce_ctx_t *ce = ((ce_conn_t *)conn)->ce;
  *done = 0;
  if (ce->dirty) {
    PCL_CUDA_CHECK(cudaEventRecord(ce->flush_ev, ce->stream));
    ce->dirty = 0;
    ce->flush_pending = 1;
  }
  if (!ce->flush_pending) {
    *done = 1;
    return ncclSuccess;
  }
  cudaError_t e = cudaEventQuery(ce->flush_ev);
  if (e == cudaErrorNotReady)
    return ncclSuccess;
  if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_PORT, "ce: copy failed: %s", cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  ce->flush_pending = 0;
  *done = 1;
  return ncclSuccess;
}

const struct pcl_transport_ops pcl_transport_ce_ops = {
    .name = "ce",
    .init = ce_init,
    .fini = ce_fini,
    .connect = ce_connect,
    .disconnect = ce_disconnect,
    .put = ce_put,
    .signal = ce_signal,
    .flush = ce_flush,
};
