/* SPDX-License-Identifier: MIT
 * TCP transport: one socket per peer pair; the proxy thread sends puts and signals (device
 * sources staged through host memory; a small put and the signal after it in one send), a
 * receiver thread per connection applies them in order to registered local memory, so a signal
 * is visible only after the data sent before it. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "alloc.h"
#include "log.h"
#include "pcl_check.h"
#include "socket.h"
#include "transport.h"

#define TCP_MAGIC 0x70636c7463703031ull /* "pcltcp01" */
#define TCP_GREET_MS 2000               /* a connection's time to greet before it is dropped */
#define TCP_TAG (PCL_TRANSPORT_TAG_BASE + 2)
#define STAGE_BYTES (4u << 20)
/* Puts up to this size are copied into the outbox (below) and leave with what follows them;
 * larger ones are sent from their source (host) or staged in STAGE_BYTES chunks (device). */
#define OUTBOX_PUT_MAX (64u << 10)
/* Device destinations: recv_stage is RX_SLOTS slots; each chunk read from the socket is copied
 * to the GPU asynchronously from its own slot, so the next one is read while it copies. */
#define RX_SLOTS 8
#define RX_SLOT_BYTES (STAGE_BYTES / RX_SLOTS)
/* Large device sources: send_stage's two halves alternate, one filling while the other sends. */
#define TX_HALF_BYTES (STAGE_BYTES / 2)

enum { MSG_PUT = 1, MSG_SIGNAL = 2 };

typedef struct {
  uint32_t type;
  uint32_t mem_id;
  uint64_t off;
  uint64_t arg; /* PUT: bytes; SIGNAL: value */
} tcp_hdr_t;

typedef struct {
  uint64_t magic;
  int32_t rank, peer;
} tcp_greet_t;

typedef struct {
  pcl_transport_ctx_t *ctx;
  int peer, fd;
  pthread_t rx;
  int rx_started;
  atomic_int stop;
  /* Host staging for device memory (pinned when a GPU exists); send_stage is the outbox too. */
  void *send_stage, *recv_stage;
  /* The outbox: send_stage[0, out_len) holds messages not sent yet, in issue order. A small put
   * waits there for the signal that usually follows it in the same trigger, so the pair leaves
   * in one send (one segment, one wake-up of the receiver instead of three); progress (every
   * proxy loop), flush, a large put and a full outbox send it too. Proxy thread only. */
  size_t out_len;
  int stage_pinned;
  /* The device's staging streams (tcp_streams_get), shared by every connection on it. */
  cudaStream_t send_stream, recv_stream;
  /* Receiver thread only. rx_ev[k]: recorded after the copy out of slot k (rx_used[k]: one was
   * recorded); a slot is refilled only after its event. Device puts and device semaphore
   * writes are ordered by recv_stream alone, so a device signal needs no wait; a host-memory
   * signal waits for the last copy (rx_last) first, since its plain store would overtake it. */
  cudaEvent_t rx_ev[RX_SLOTS];
  int rx_used[RX_SLOTS], rx_next, rx_last;
  /* Proxy thread only: tx_ev[h] recorded after the copy into send_stage half h. */
  cudaEvent_t tx_ev[2];
} tcp_conn_t;

/* Staging copies run on non-blocking streams (the legacy default stream would wait for the very
 * kernel that waits for this data), one pair per device for the whole process, shared by every
 * connection of every communicator on it: a pair per connection made the streams grow with the
 * peers, and beyond CUDA_DEVICE_MAX_CONNECTIONS streams (8 by default) CUDA shares a hardware
 * queue between streams, where a staging copy can wait behind a kernel that waits for it.
 * Copies never wait for anything, so connections sharing a stream only wait for each other's
 * copies (each one synchronises after its own). Reference-counted under tcp_streams_lock. */
#define TCP_MAX_DEVICES 64
static pthread_mutex_t tcp_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int refs;
  cudaStream_t send, recv;
} tcp_streams[TCP_MAX_DEVICES];

/* The device's pair, created on first use; the caller has made dev current. */
static cudaError_t tcp_streams_get(int dev, cudaStream_t *send, cudaStream_t *recv) {
  if (dev < 0 || dev >= TCP_MAX_DEVICES)
    return cudaErrorInvalidDevice;
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&tcp_streams_lock);
  if (tcp_streams[dev].refs == 0) {
    e = cudaStreamCreateWithFlags(&tcp_streams[dev].send, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
      e = cudaStreamCreateWithFlags(&tcp_streams[dev].recv, cudaStreamNonBlocking);
      if (e != cudaSuccess)
        cudaStreamDestroy(tcp_streams[dev].send);
    }
  }
  if (e == cudaSuccess) {
    tcp_streams[dev].refs++;
    *send = tcp_streams[dev].send;
    *recv = tcp_streams[dev].recv;
  }
  pthread_mutex_unlock(&tcp_streams_lock);
  return e;
}

/* Drops one reference; the last one destroys the pair (no copy is in flight: each connection
 * synchronised its own before returning). */
static void tcp_streams_put(int dev) {
  pthread_mutex_lock(&tcp_streams_lock);
  if (dev >= 0 && dev < TCP_MAX_DEVICES && tcp_streams[dev].refs > 0 &&
      --tcp_streams[dev].refs == 0) {
    cudaStreamDestroy(tcp_streams[dev].send);
    cudaStreamDestroy(tcp_streams[dev].recv);
    tcp_streams[dev].send = tcp_streams[dev].recv = NULL;
  }
  pthread_mutex_unlock(&tcp_streams_lock);
}

/* Synchronous copy on a non-blocking stream. */
static cudaError_t copy_sync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                             cudaStream_t s) {
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
  return e == cudaSuccess ? cudaStreamSynchronize(s) : e;
}

static void events_destroy(tcp_conn_t *c) {
  for (int k = 0; k < RX_SLOTS; k++)
    if (c->rx_ev[k] != NULL)
      cudaEventDestroy(c->rx_ev[k]);
  for (int k = 0; k < 2; k++)
    if (c->tx_ev[k] != NULL)
      cudaEventDestroy(c->tx_ev[k]);
  memset(c->rx_ev, 0, sizeof(c->rx_ev));
  memset(c->tx_ev, 0, sizeof(c->tx_ev));
}

static ncclResult_t stage_alloc(tcp_conn_t *c) {
  const int dev = c->ctx->cuda_dev;
  if (dev < 0) { /* no GPU: nothing to stage, plain host buffers */
    c->send_stage = pcl_calloc(1, STAGE_BYTES, "tcp send staging");
    c->recv_stage = pcl_calloc(1, STAGE_BYTES, "tcp recv staging");
    return (c->send_stage && c->recv_stage) ? ncclSuccess : ncclSystemError;
  }
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess)
    e = tcp_streams_get(dev, &c->send_stream, &c->recv_stream);
  if (e == cudaSuccess) {
    e = cudaHostAlloc(&c->send_stage, STAGE_BYTES, 0);
    if (e == cudaSuccess)
      e = cudaHostAlloc(&c->recv_stage, STAGE_BYTES, 0);
    for (int k = 0; k < RX_SLOTS && e == cudaSuccess; k++)
      e = cudaEventCreateWithFlags(&c->rx_ev[k], cudaEventDisableTiming);
    for (int k = 0; k < 2 && e == cudaSuccess; k++)
      e = cudaEventCreateWithFlags(&c->tx_ev[k], cudaEventDisableTiming);
    if (e != cudaSuccess) {
      events_destroy(c);
      if (c->send_stage)
        cudaFreeHost(c->send_stage);
      if (c->recv_stage)
        cudaFreeHost(c->recv_stage);
      c->send_stage = c->recv_stage = NULL;
      tcp_streams_put(dev);
      c->send_stream = c->recv_stream = NULL;
    }
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: cannot set up GPU staging on device %d: %s", c->ctx->rank,
             dev, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  c->stage_pinned = 1;
  return ncclSuccess;
}

/* Called once neither thread copies any more: the receiver's copies still in flight end first
 * (they read recv_stage). */
static void stage_free(tcp_conn_t *c) {
  for (int k = 0; k < RX_SLOTS; k++)
    if (c->rx_used[k] && cudaEventSynchronize(c->rx_ev[k]) != cudaSuccess)
      (void)cudaGetLastError();
  events_destroy(c);
  if (c->send_stream)
    tcp_streams_put(c->ctx->cuda_dev);
  if (c->stage_pinned) {
    cudaFreeHost(c->send_stage);
    cudaFreeHost(c->recv_stage);
  } else {
    pcl_free(c->send_stage);
    pcl_free(c->recv_stage);
  }
}

/* Receives exactly n bytes; returns 1 on success, 0 on orderly close at a message boundary
 * (first == 1), -1 on error/stop. */
static int rx_bytes(tcp_conn_t *c, void *buf, size_t n, int first) {
  size_t got = 0;
  while (got < n) {
    if (atomic_load_explicit(&c->stop, memory_order_relaxed))
      return -1;
    ssize_t r = recv(c->fd, (char *)buf + got, n - got, 0);
    if (r > 0) {
      got += (size_t)r;
      continue;
    }
    if (r == 0) {
      if (first && got == 0)
        return 0;
      PCL_WARN(PCL_LOG_NET, "tcp rank %d: connection to rank %d closed mid-message", c->ctx->rank,
               c->peer);
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
    struct pollfd p = {.fd = c->fd, .events = POLLIN, .revents = 0};
    (void)poll(&p, 1, 100);
  }
  return 1;
}

static int rx_cuda_failed(tcp_conn_t *c, const char *what, cudaError_t e) {
  PCL_WARN(PCL_LOG_NET, "tcp rank %d: %s failed: %s", c->ctx->rank, what, cudaGetErrorString(e));
  return -1;
}

/* Device destination: each chunk is read into the next slot (once that slot's previous copy has
 * ended) and copied asynchronously, so reading the socket overlaps the copies. */
static int apply_put(tcp_conn_t *c, const tcp_hdr_t *h, const pcl_mem_local_t *m) {
  char *dst = (char *)m->base + h->off;
  if (!m->is_device)
    return rx_bytes(c, dst, h->arg, 0) == 1 ? 0 : -1;
  for (uint64_t done = 0; done < h->arg;) {
    size_t n = h->arg - done < RX_SLOT_BYTES ? (size_t)(h->arg - done) : RX_SLOT_BYTES;
    const int k = c->rx_next;
    char *slot = (char *)c->recv_stage + (size_t)k * RX_SLOT_BYTES;
    cudaError_t e = c->rx_used[k] ? cudaEventSynchronize(c->rx_ev[k]) : cudaSuccess;
    if (e != cudaSuccess)
      return rx_cuda_failed(c, "copy to GPU memory", e);
    if (rx_bytes(c, slot, n, 0) != 1)
      return -1;
    e = cudaMemcpyAsync(dst + done, slot, n, cudaMemcpyHostToDevice, c->recv_stream);
    if (e == cudaSuccess)
      e = cudaEventRecord(c->rx_ev[k], c->recv_stream);
    if (e != cudaSuccess)
      return rx_cuda_failed(c, "copy to GPU memory", e);
    c->rx_used[k] = 1;
    c->rx_last = k;
    c->rx_next = (k + 1) % RX_SLOTS;
    done += n;
  }
  return 0;
}

static int apply_signal(tcp_conn_t *c, const tcp_hdr_t *h, const pcl_mem_local_t *m) {
  uint64_t *sem = (uint64_t *)((char *)m->base + h->off);
  if (!m->is_device) {
    /* The device puts before it must have landed: wait for the last copy (the earlier ones end
     * before it, one stream). */
    if (c->rx_used[c->rx_last]) {
      cudaError_t e = cudaEventSynchronize(c->rx_ev[c->rx_last]);
      if (e != cudaSuccess)
        return rx_cuda_failed(c, "copy to GPU memory", e);
    }
    /* Release: the data written before (by this thread) is visible to whoever acquires it. */
    atomic_store_explicit((_Atomic uint64_t *)sem, h->arg, memory_order_release);
    return 0;
  }
  /* Queued behind the data copies on the same stream, so the GPU sees it after them; no wait.
   * The value comes from pageable memory (h), which cudaMemcpyAsync has copied when it returns
   * (the CUDA runtime's rule for pageable host-to-device copies). */
  cudaError_t e =
      cudaMemcpyAsync(sem, &h->arg, sizeof(uint64_t), cudaMemcpyHostToDevice, c->recv_stream);
  return e == cudaSuccess ? 0 : rx_cuda_failed(c, "semaphore write", e);
}

static void *rx_main(void *arg) {
  tcp_conn_t *c = arg;
  pcl_log_set_thread_rank(c->ctx->rank, c->ctx->cuda_dev);
  if (c->ctx->cuda_dev >= 0 && cudaSetDevice(c->ctx->cuda_dev) != cudaSuccess)
    (void)cudaGetLastError();
  for (;;) {
    tcp_hdr_t h;
    int r = rx_bytes(c, &h, sizeof(h), 1);
    if (r <= 0)
      break; /* closed by the peer at teardown, or stopped */
    const pcl_mem_local_t *m = c->ctx->lookup(c->ctx->owner, h.mem_id);
    uint64_t need = h.type == MSG_PUT ? h.arg : sizeof(uint64_t);
    if (m == NULL || h.off + need > m->size || (h.type != MSG_PUT && h.type != MSG_SIGNAL)) {
      PCL_WARN(PCL_LOG_NET,
               "tcp rank %d: message from rank %d names memory %u+%llu (%llu bytes): "
               "not registered or out of range; closing",
               c->ctx->rank, c->peer, h.mem_id, (unsigned long long)h.off,
               (unsigned long long)need);
      break;
    }
    if ((h.type == MSG_PUT ? apply_put(c, &h, m) : apply_signal(c, &h, m)) != 0)
      break;
  }
  return NULL;
}

static int greet_ok(const void *got, void *want) {
  const tcp_greet_t *g = got, *w = want;
  return g->magic == w->magic && g->rank == w->rank && g->peer == w->peer;
}

static ncclResult_t tcp_connect(pcl_transport_ctx_t *ctx, int peer, void **out) {
  ncclResult_t res = ncclSuccess;
  tcp_conn_t *c = NULL;
  int lfd = -1;
  char what[96];
  snprintf(what, sizeof(what), "tcp rank %d: connecting to rank %d", ctx->rank, peer);
  if (peer == ctx->rank) {
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: no connection to itself", ctx->rank);
    return ncclInvalidUsage;
  }
  PCL_CALLOC(c, 1, "tcp connection");
  if (c == NULL)
    return ncclSystemError;
  c->ctx = ctx;
  c->peer = peer;
  c->fd = -1;
  PCL_CHECK_GOTO(stage_alloc(c), res, err);
  pcl_socket_wait_t w = pcl_socket_wait_default(ctx->abort_flag, what);
  tcp_greet_t g = {TCP_MAGIC, ctx->rank, peer}, pg;
  if (ctx->rank < peer) {
    /* Lower rank listens and tells the peer where, then waits for it. */
    char ifname[64];
    pcl_sockaddr_t local, bound;
    PCL_CHECK_GOTO(pcl_socket_find_interface(ifname, sizeof(ifname), &local), res, err);
    PCL_CHECK_GOTO(pcl_socket_listen(&local, &lfd, &bound), res, err);
    PCL_CHECK_GOTO(pcl_bootstrap_send(ctx->bootstrap, peer, TCP_TAG, &bound, sizeof(bound)), res,
                   err);
    /* A stranger on the port (silent or wrong) costs the real peer TCP_GREET_MS at most. */
    tcp_greet_t want = {TCP_MAGIC, peer, ctx->rank};
    int dropped = 0;
    res = pcl_socket_accept_greeted(lfd, &w, TCP_GREET_MS, &pg, sizeof(pg), greet_ok, &want, &c->fd,
                                    &dropped);
    if (dropped > 0)
      PCL_WARN(PCL_LOG_NET,
               "tcp rank %d: dropped %d foreign connection(s) while waiting for rank %d", ctx->rank,
               dropped, peer);
    if (res != ncclSuccess)
      goto err;
    pcl_socket_close(&lfd);
  } else {
    pcl_sockaddr_t addr;
    PCL_CHECK_GOTO(pcl_bootstrap_recv(ctx->bootstrap, peer, TCP_TAG, &addr, sizeof(addr)), res,
                   err);
    PCL_CHECK_GOTO(pcl_socket_connect(&addr, &w, &c->fd), res, err);
    PCL_CHECK_GOTO(pcl_socket_send(c->fd, &g, sizeof(g), &w), res, err);
  }
  int err = pthread_create(&c->rx, NULL, rx_main, c);
  if (err != 0) {
    PCL_WARN(PCL_LOG_NET, "tcp: cannot start the receiver thread: %s", strerror(err));
    res = ncclSystemError;
    goto err;
  }
  c->rx_started = 1;
  *out = c;
  return ncclSuccess;
err:
  pcl_socket_close(&lfd);
  pcl_socket_close(&c->fd);
  stage_free(c);
  pcl_free(c);
  return res;
}

static void tcp_disconnect(pcl_transport_ctx_t *ctx, void *conn) {
  tcp_conn_t *c = conn;
  if (c == NULL)
    return;
  atomic_store(&c->stop, 1);
  if (c->fd >= 0)
    shutdown(c->fd, SHUT_RDWR);
  if (c->rx_started)
    pthread_join(c->rx, NULL);
  pcl_socket_close(&c->fd);
  stage_free(c);
  pcl_free(c);
}

static ncclResult_t send_all(tcp_conn_t *c, const void *buf, size_t n) {
  char what[80];
  snprintf(what, sizeof(what), "tcp rank %d: sending to rank %d", c->ctx->rank, c->peer);
  pcl_socket_wait_t w = pcl_socket_wait_default(c->ctx->abort_flag, what);
  return pcl_socket_send(c->fd, buf, n, &w);
}

/* Sends what waits in the outbox. */
static ncclResult_t out_drain(tcp_conn_t *c) {
  if (c->out_len == 0)
    return ncclSuccess;
  ncclResult_t res = send_all(c, c->send_stage, c->out_len);
  c->out_len = 0;
  return res;
}

/* Room for n more bytes in the outbox, sending what waits there when it lacks it. */
static ncclResult_t out_room(tcp_conn_t *c, size_t n) {
  return c->out_len + n <= STAGE_BYTES ? ncclSuccess : out_drain(c);
}

/* Queues the copy of chunk [at, at + n) of a device source into send_stage half `half`. */
static cudaError_t tx_stage(tcp_conn_t *c, const char *s, uint64_t at, size_t n, int half) {
  cudaError_t e = cudaMemcpyAsync((char *)c->send_stage + (size_t)half * TX_HALF_BYTES, s + at, n,
                                  cudaMemcpyDeviceToHost, c->send_stream);
  return e == cudaSuccess ? cudaEventRecord(c->tx_ev[half], c->send_stream) : e;
}

/* A large device source (the outbox is empty): chunks staged into the halves of send_stage in
 * turn, the next copy running while the current half is sent. Every copy queued has ended when
 * this returns, so the outbox may be reused at once. */
static ncclResult_t send_device(tcp_conn_t *c, const char *s, uint64_t bytes) {
  ncclResult_t res = ncclSuccess;
  size_t n = bytes < TX_HALF_BYTES ? (size_t)bytes : TX_HALF_BYTES;
  cudaError_t e = tx_stage(c, s, 0, n, 0);
  int inflight = e == cudaSuccess ? 0 : -1; /* the half a queued copy fills, -1: none */
  for (uint64_t done = 0; e == cudaSuccess && res == ncclSuccess && done < bytes;) {
    const int cur = inflight;
    e = cudaEventSynchronize(c->tx_ev[cur]);
    inflight = -1;
    const uint64_t next = done + n;
    size_t nn = 0;
    if (e == cudaSuccess && next < bytes) {
      nn = bytes - next < TX_HALF_BYTES ? (size_t)(bytes - next) : TX_HALF_BYTES;
      e = tx_stage(c, s, next, nn, cur ^ 1);
      if (e == cudaSuccess)
        inflight = cur ^ 1;
    }
    if (e == cudaSuccess)
      res = send_all(c, (char *)c->send_stage + (size_t)cur * TX_HALF_BYTES, n);
    done = next;
    n = nn;
  }
  if (inflight >= 0 && cudaEventSynchronize(c->tx_ev[inflight]) != cudaSuccess)
    (void)cudaGetLastError(); /* an error already being reported */
  if (e != cudaSuccess) {
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: staging GPU data failed: %s", c->ctx->rank,
             cudaGetErrorString(e));
    return ncclUnhandledCudaError;
  }
  return res;
}

static ncclResult_t tcp_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                            const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  tcp_conn_t *c = conn;
  tcp_hdr_t h = {MSG_PUT, dst->mem_id, doff, bytes};
  const char *s = (const char *)src->base + so;
  if (bytes <= OUTBOX_PUT_MAX) {
    PCL_CHECK(out_room(c, sizeof(h) + bytes));
    char *at = (char *)c->send_stage + c->out_len;
    memcpy(at, &h, sizeof(h));
    if (!src->is_device) {
      memcpy(at + sizeof(h), s, bytes);
    } else {
      cudaError_t e = copy_sync(at + sizeof(h), s, bytes, cudaMemcpyDeviceToHost, c->send_stream);
      if (e != cudaSuccess) {
        PCL_WARN(PCL_LOG_NET, "tcp rank %d: staging GPU data failed: %s", c->ctx->rank,
                 cudaGetErrorString(e));
        return ncclUnhandledCudaError;
      }
    }
    c->out_len += sizeof(h) + bytes;
    return ncclSuccess;
  }
  /* Large: what waits goes first (issue order), then this put from its source. */
  PCL_CHECK(out_drain(c));
  PCL_CHECK(send_all(c, &h, sizeof(h)));
  if (!src->is_device)
    return send_all(c, s, bytes);
  return send_device(c, s, bytes);
}

/* A signal leaves at once, with whatever waits before it in the outbox. */
static ncclResult_t tcp_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                               uint64_t value) {
  tcp_conn_t *c = conn;
  tcp_hdr_t h = {MSG_SIGNAL, dst->mem_id, off, value};
  PCL_CHECK(out_room(c, sizeof(h)));
  memcpy((char *)c->send_stage + c->out_len, &h, sizeof(h));
  c->out_len += sizeof(h);
  return out_drain(c);
}

/* Sends are synchronous once out of the outbox (every source was copied before put returned),
 * so flushed means the outbox is empty. */
static ncclResult_t tcp_flush(void *conn, int *done) {
  tcp_conn_t *c = conn;
  ncclResult_t res = out_drain(c);
  *done = res == ncclSuccess;
  return res;
}

/* Every proxy loop: a put that no signal followed leaves now. */
static ncclResult_t tcp_progress(void *conn) {
  return out_drain((tcp_conn_t *)conn);
}

const struct pcl_transport_ops pcl_transport_tcp_ops = {
    .name = "tcp",
    .connect = tcp_connect,
    .disconnect = tcp_disconnect,
    .put = tcp_put,
    .signal = tcp_signal,
    .flush = tcp_flush,
    .progress = tcp_progress,
};
