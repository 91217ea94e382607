/* SPDX-License-Identifier: MIT
 * The TCP transport's send side below the proxy: device sources staged through pinned halves,
 * and the sender threads of the stripe streams, each draining a queue of parts of large puts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "pcl_check.h"
#include "socket.h"
#include "tcp_int.h"

void pcl_tcp_thread_enter(const tcp_conn_t *c) {
  pcl_log_set_thread_rank(c->ctx->rank, c->ctx->cuda_dev);
  /* A failure shows at the thread's first copy, which reports it. */
  if (c->ctx->cuda_dev >= 0 && cudaSetDevice(c->ctx->cuda_dev) != cudaSuccess)
    (void)cudaGetLastError();
}

/* Polled rather than synchronised, so that a copy that does not end says so (on the one-GPU
 * bed a staging copy has been seen stuck for 10 s, until the kernels' timeout, while a kernel
 * waited for this very proxy: the WARN tells that case from a proxy stuck elsewhere), and so
 * that a stop or an abort ends the wait. */
cudaError_t pcl_tcp_stage_small(tcp_stream_t *st0, void *dst, const void *src, size_t n) {
  tcp_conn_t *c = st0->c;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->send_stream);
  if (e == cudaSuccess)
    e = cudaEventRecord(st0->tx_ev[0], c->send_stream);
  const uint64_t t0 = pcl_socket_now_ns();
  int warned = 0;
  while (e == cudaSuccess && (e = cudaEventQuery(st0->tx_ev[0])) == cudaErrorNotReady) {
    if (atomic_load_explicit(&c->stop, memory_order_relaxed) ||
        (c->ctx->abort_flag != NULL && *c->ctx->abort_flag != 0))
      return cudaErrorNotReady;
    e = cudaSuccess;
    if (!warned && pcl_socket_now_ns() - t0 > 1000000000ull) {
      warned = 1;
      PCL_WARN(PCL_LOG_NET,
               "tcp: a %zu-byte staging copy has not ended after 1 s (queued behind a kernel "
               "that waits for this proxy?)",
               n);
    }
  }
  if (warned && e == cudaSuccess)
    PCL_WARN(PCL_LOG_NET, "tcp: that staging copy ended after %.1f s",
             (double)(pcl_socket_now_ns() - t0) * 1e-9);
  return e;
}

ncclResult_t pcl_tcp_send_all(tcp_stream_t *st, const void *buf, size_t n) {
  char what[96];
  snprintf(what, sizeof(what), "tcp rank %d: sending to rank %d (connection %d)", st->c->ctx->rank,
           st->c->peer, st->idx);
  /* PLANCCL_BOOTSTRAP_TIMEOUT_S without a byte going out fails the send; a slow but moving
   * link does not, however long the message. */
  pcl_socket_wait_t w = pcl_socket_wait_default(st->c->ctx->abort_flag, what);
  return pcl_socket_send_stall(st->fd, buf, n, &w, (uint64_t)w.timeout_s * 1000000000ull);
}

/* Queues the copy of chunk [at, at + n) of a device source into send_stage half `half`. */
static cudaError_t tx_stage(tcp_stream_t *st, const char *s, uint64_t at, size_t n, int half) {
  cudaError_t e = cudaMemcpyAsync((char *)st->send_stage + (size_t)half * (st->stage_bytes / 2),
                                  s + at, n, cudaMemcpyDeviceToHost, st->c->send_stream);
  return e == cudaSuccess ? cudaEventRecord(st->tx_ev[half], st->c->send_stream) : e;
}

/* Chunks staged into the halves of send_stage in turn, the next copy running while the current
 * half is sent. Stream 0's outbox is empty when it is called. */
ncclResult_t pcl_tcp_send_device(tcp_stream_t *st, const char *s, uint64_t bytes) {
  const size_t half_bytes = st->stage_bytes / 2;
  ncclResult_t res = ncclSuccess;
  size_t n = bytes < half_bytes ? (size_t)bytes : half_bytes;
  cudaError_t e = tx_stage(st, s, 0, n, 0);
  int inflight = e == cudaSuccess ? 0 : -1; /* the half a queued copy fills, -1: none */
  for (uint64_t done = 0; e == cudaSuccess && res == ncclSuccess && done < bytes;) {
    const int cur = inflight;
    e = cudaEventSynchronize(st->tx_ev[cur]);
    inflight = -1;
    const uint64_t next = done + n;
    size_t nn = 0;
    if (e == cudaSuccess && next < bytes) {
      nn = bytes - next < half_bytes ? (size_t)(bytes - next) : half_bytes;
      e = tx_stage(st, s, next, nn, cur ^ 1);
      if (e == cudaSuccess)
        inflight = cur ^ 1;
    }
    if (e == cudaSuccess)
      res = pcl_tcp_send_all(st, (char *)st->send_stage + (size_t)cur * half_bytes, n);
    done = next;
    n = nn;
  }
  if (inflight >= 0 && cudaEventSynchronize(st->tx_ev[inflight]) != cudaSuccess)
    (void)cudaGetLastError(); /* an error already being reported */
  if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: staging GPU data failed: %s", st->c->ctx->rank,
             cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return res;
}

/* Called by the proxy thread: waits for room (the sender drains the queue on its own), never
 * past a stop or a sender's failure. */
ncclResult_t pcl_tcp_tx_queue(tcp_stream_t *st, const tcp_job_t *job) {
  tcp_conn_t *c = st->c;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&st->lock);
  for (;;) {
    res = (ncclResult_t)atomic_load_explicit(&c->tx_error, memory_order_acquire);
    if (res == ncclSuccess && atomic_load_explicit(&c->stop, memory_order_relaxed))
      res = ncclSystemError;
    if (res != ncclSuccess || st->tail - st->head < TCP_JOBS)
      break;
    pthread_cond_wait(&st->cond, &st->lock);
  }
  if (res == ncclSuccess) {
    st->jobs[st->tail % TCP_JOBS] = *job;
    st->tail++;
    pthread_cond_broadcast(&st->cond);
  }
  pthread_mutex_unlock(&st->lock);
  return res;
}

void pcl_tcp_tx_stop(tcp_stream_t *st) {
  pthread_mutex_lock(&st->lock);
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->lock);
}

ncclResult_t pcl_tcp_send_job(tcp_stream_t *st, const tcp_job_t *j) {
  PCL_CHECK(pcl_tcp_send_all(st, &j->h, sizeof(j->h)));
  if (!j->is_device)
    return pcl_tcp_send_all(st, j->src, j->h.arg);
  return pcl_tcp_send_device(st, j->src, j->h.arg);
}

void *pcl_tcp_tx_main(void *arg) {
  tcp_stream_t *st = arg;
  tcp_conn_t *c = st->c;
  pcl_tcp_thread_enter(c);
  for (;;) {
    pthread_mutex_lock(&st->lock);
    while (st->head == st->tail && !atomic_load_explicit(&c->stop, memory_order_relaxed))
      pthread_cond_wait(&st->cond, &st->lock);
    if (st->head == st->tail) { /* stopped with nothing queued */
      pthread_mutex_unlock(&st->lock);
      break;
    }
    tcp_job_t j = st->jobs[st->head % TCP_JOBS];
    pthread_mutex_unlock(&st->lock);
    /* After a failure (or a stop) the queue is only drained: the proxy reports the error. */
    if (atomic_load_explicit(&c->tx_error, memory_order_acquire) == ncclSuccess &&
        !atomic_load_explicit(&c->stop, memory_order_relaxed)) {
      ncclResult_t res = pcl_tcp_send_job(st, &j);
      int none = ncclSuccess;
      if (res != ncclSuccess)
        atomic_compare_exchange_strong(&c->tx_error, &none, (int)res);
    }
    pthread_mutex_lock(&st->lock);
    st->head++;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
    /* Release: the flush that sees this count may let the source be overwritten. */
    atomic_fetch_add_explicit(&st->sent, 1, memory_order_release);
  }
  return NULL;
}
