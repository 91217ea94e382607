/* SPDX-License-Identifier: MIT
 * The TCP transport's receivers: one thread per stream applies its messages in order to
 * registered local memory, each only after the other streams' messages it is fenced behind. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"
#include "tcp_int.h"

/* Receives exactly n bytes; returns 1 on success, 0 on orderly close at a message boundary
 * (first == 1), -1 on error/stop. */
static int rx_bytes(tcp_stream_t *st, void *buf, size_t n, int first) {
  tcp_conn_t *c = st->c;
  size_t got = 0;
  while (got < n) {
    if (atomic_load_explicit(&c->stop, memory_order_relaxed))
      return -1;
    ssize_t r = recv(st->fd, (char *)buf + got, n - got, 0);
    if (r > 0) {
      got += (size_t)r;
      continue;
    }
    if (r == 0) {
      if (first && got == 0)
        return 0;
      PCL_WARN(PCL_LOG_NET, "tcp rank %d: connection %d to rank %d closed mid-message",
               c->ctx->rank, st->idx, c->peer);
      return -1;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (!atomic_load_explicit(&c->stop, memory_order_relaxed))
        PCL_WARN(PCL_LOG_NET, "tcp rank %d: recv from rank %d failed: %s", c->ctx->rank, c->peer,
                 strerror(errno));
      return -1;
    }
    struct pollfd p = {.fd = st->fd, .events = POLLIN, .revents = 0};
    (void)poll(&p, 1, 100);
  }
  return 1;
}

static int rx_cuda_failed(tcp_stream_t *st, const char *what, cudaError_t e) {
  PCL_WARN(PCL_LOG_NET, "tcp rank %d: %s failed: %s", st->c->ctx->rank, what,
           cudaGetErrorString(e));
  return -1;
}

/* Waits until every other stream has applied what h is fenced behind; -1 when one never will
 * (its receiver exited) or the connection stops. Counts compare modulo 2^32: a fence is never
 * 2^31 messages ahead of what its stream applied. */
static int rx_fence(tcp_stream_t *st, const tcp_hdr_t *h) {
  tcp_conn_t *c = st->c;
  for (int j = 0; j < c->nstreams; j++) {
    if (j == st->idx)
      continue;
    tcp_stream_t *o = &c->s[j];
    for (unsigned spin = 0;; spin++) {
      uint32_t done = (uint32_t)atomic_load_explicit(&o->applied, memory_order_acquire);
      if ((int32_t)(h->after[j] - done) <= 0)
        break;
      if (atomic_load_explicit(&c->stop, memory_order_relaxed))
        return -1;
      if (atomic_load_explicit(&o->rx_done, memory_order_acquire)) {
        done = (uint32_t)atomic_load_explicit(&o->applied, memory_order_acquire);
        if ((int32_t)(h->after[j] - done) <= 0)
          break;
        PCL_WARN(PCL_LOG_NET,
                 "tcp rank %d: connection %d to rank %d ended before the data a message on "
                 "connection %d waits for",
                 c->ctx->rank, j, c->peer, st->idx);
        return -1;
      }
      /* What a fence waits for is a stripe of a large put: it takes tens of microseconds at
       * least, so waiting long does not need a hot core. */
      if (spin < 64) {
        continue;
      } else if (spin < 1024) {
        sched_yield();
      } else {
        struct timespec ts = {0, 5000};
        nanosleep(&ts, NULL);
      }
    }
  }
  return 0;
}

/* The next receive slot, once its previous copy to the GPU has ended. */
static char *rx_slot(tcp_stream_t *st, int *k) {
  *k = st->rx_next;
  if (st->rx_used[*k]) {
    cudaError_t e = cudaEventSynchronize(st->rx_ev[*k]);
    if (e != cudaSuccess) {
      rx_cuda_failed(st, "copy to GPU memory", e);
      return NULL;
    }
  }
  return (char *)st->recv_stage + (size_t)*k * (st->stage_bytes / TCP_RX_SLOTS);
}

/* Queues the copy of slot k's n bytes to dst and records the slot's event. */
static int rx_copy(tcp_stream_t *st, int k, void *dst, const char *slot, size_t n) {
  tcp_conn_t *c = st->c;
  cudaError_t e = cudaMemcpyAsync(dst, slot, n, cudaMemcpyHostToDevice, c->recv_stream);
  if (e == cudaSuccess)
    e = cudaEventRecord(st->rx_ev[k], c->recv_stream);
  if (e != cudaSuccess)
    return rx_cuda_failed(st, "copy to GPU memory", e);
  st->rx_used[k] = 1;
  st->rx_next = (k + 1) % TCP_RX_SLOTS;
  atomic_fetch_add_explicit(&c->rx_dev_copies, 1, memory_order_relaxed);
  return 0;
}

/* Device destination: each chunk is read into the next slot and copied asynchronously, so
 * reading the socket overlaps the copies. */
static int apply_put(tcp_stream_t *st, const tcp_hdr_t *h, const pcl_mem_local_t *m) {
  char *dst = (char *)m->base + h->off;
  if (!m->is_device)
    return rx_bytes(st, dst, h->arg, 0) == 1 ? 0 : -1;
  const size_t slot_bytes = st->stage_bytes / TCP_RX_SLOTS;
  for (uint64_t done = 0; done < h->arg;) {
    size_t n = h->arg - done < slot_bytes ? (size_t)(h->arg - done) : slot_bytes;
    int k;
    char *slot = rx_slot(st, &k);
    if (slot == NULL || rx_bytes(st, slot, n, 0) != 1 || rx_copy(st, k, dst + done, slot, n) != 0)
      return -1;
    done += n;
  }
  return 0;
}

static int apply_signal(tcp_stream_t *st, const tcp_hdr_t *h, const pcl_mem_local_t *m) {
  tcp_conn_t *c = st->c;
  uint64_t *sem = (uint64_t *)((char *)m->base + h->off);
  if (!m->is_device) {
    /* The device puts before it (on any stream: the fence saw them queued) must have landed. A
     * host signal travels only on stream 0, so rx_synced is this thread's. The receive stream
     * is shared by the device's connections, whose copies never wait for anything. */
    uint64_t queued = atomic_load_explicit(&c->rx_dev_copies, memory_order_relaxed);
    if (queued != c->rx_synced) {
      cudaError_t e = cudaStreamSynchronize(c->recv_stream);
      if (e != cudaSuccess)
        return rx_cuda_failed(st, "copy to GPU memory", e);
      c->rx_synced = queued;
    }
    /* Release: the data written before (by these threads) is visible to whoever acquires it. */
    atomic_store_explicit((_Atomic uint64_t *)sem, h->arg, memory_order_release);
    return 0;
  }
  /* Queued behind the data copies on the same stream (this stream's and, through the fence,
   * the others'), so the GPU sees it after them; the value travels from a pinned slot, so the
   * copy is asynchronous. */
  int k;
  char *slot = rx_slot(st, &k);
  if (slot == NULL)
    return -1;
  memcpy(slot, &h->arg, sizeof(uint64_t));
  return rx_copy(st, k, sem, slot, sizeof(uint64_t));
}

/* Every exit of a receiver but an orderly close or a stop loses messages for good: the proxy
 * records the failure (already WARNed where it was seen), so the communicator reports it
 * (ncclCommGetAsyncError) instead of leaving its kernels to wait for data that never comes. */
static void rx_failed(tcp_stream_t *st, ncclResult_t res) {
  tcp_conn_t *c = st->c;
  if (atomic_load_explicit(&c->stop, memory_order_relaxed) || c->ctx->failed == NULL)
    return;
  PCL_WARN(PCL_LOG_NET, "tcp rank %d: connection %d to rank %d stops receiving (%s)", c->ctx->rank,
           st->idx, c->peer,
           res == ncclRemoteError ? "the peer's stream broke" : "a local failure");
  c->ctx->failed(c->ctx->owner, res);
}

void *pcl_tcp_rx_main(void *arg) {
  tcp_stream_t *st = arg;
  tcp_conn_t *c = st->c;
  pcl_tcp_thread_enter(c);
  for (;;) {
    tcp_hdr_t h;
    int r = rx_bytes(st, &h, sizeof(h), 1);
    if (r > 0 && h.type == TCP_MSG_BYE)
      break; /* the peer's orderly teardown: nothing more comes, nothing was lost */
    if (r == 0) {
      /* Closed at a message boundary without a goodbye: the peer's process ended or it
       * aborted; what it would still have sent never comes. */
      if (!atomic_load_explicit(&c->stop, memory_order_relaxed))
        PCL_WARN(PCL_LOG_NET,
                 "tcp rank %d: rank %d closed connection %d without a goodbye (its process "
                 "ended or it aborted)",
                 c->ctx->rank, c->peer, st->idx);
      rx_failed(st, ncclRemoteError);
      break;
    }
    if (r < 0) {
      rx_failed(st, ncclRemoteError); /* unless stopped: a mid-message close or a socket error */
      break;
    }
    const pcl_mem_local_t *m = c->ctx->lookup(c->ctx->owner, h.mem_id);
    uint64_t need = h.type == TCP_MSG_PUT ? h.arg : sizeof(uint64_t);
    if (m == NULL || need > m->size || h.off > m->size - need ||
        (h.type != TCP_MSG_PUT && h.type != TCP_MSG_SIGNAL)) {
      PCL_WARN(PCL_LOG_NET,
               "tcp rank %d: message from rank %d names memory %u+%llu (%llu bytes): "
               "not registered or out of range; closing",
               c->ctx->rank, c->peer, h.mem_id, (unsigned long long)h.off,
               (unsigned long long)need);
      rx_failed(st, ncclRemoteError);
      break;
    }
    if (rx_fence(st, &h) != 0) {
      rx_failed(st, ncclRemoteError); /* another stream of the connection ended first */
      break;
    }
    if ((h.type == TCP_MSG_PUT ? apply_put(st, &h, m) : apply_signal(st, &h, m)) != 0) {
      rx_failed(st, ncclSystemError); /* the socket or the copy to the GPU (WARNed there) */
      break;
    }
    atomic_fetch_add_explicit(&st->applied, 1, memory_order_release);
  }
  atomic_store_explicit(&st->rx_done, 1, memory_order_release);
  return NULL;
}
