/* SPDX-License-Identifier: MIT
 * TCP transport: 1..8 sockets (streams) per peer pair. The proxy thread sends small puts and
 * signals on stream 0 (a small put and the signal after it in one send) and stripes large puts
 * over every stream (sender threads send the other parts); a receiver thread per stream applies
 * messages to registered memory behind fences, so everything lands in issue order. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "param.h"
#include "pcl_abort.h"
#include "pcl_check.h"
#include "socket.h"
#include "tcp_int.h"

#define TCP_MAGIC 0x70636c7463703032ull /* "pcltcp02" */
#define TCP_GREET_MS 2000               /* a connection's time to greet before it is dropped */
#define TCP_TAG (PCL_TRANSPORT_TAG_BASE + 2)
/* Puts from this size on are striped over every stream (when there are several), in parts of at
 * least TCP_STRIPE_PART. */
#define TCP_STRIPE_MIN (512u << 10)
#define TCP_STRIPE_PART (64u << 10)

/* Each connecting socket's first bytes. */
typedef struct {
  uint64_t magic;
  int32_t rank, peer;
  int32_t stream, nstreams;
} tcp_greet_t;

/* What the listening (lower) rank sends over the bootstrap: where, and how many streams. */
typedef struct {
  pcl_sockaddr_t addr;
  int32_t nstreams;
  int32_t pad;
} tcp_listen_msg_t;

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

static void stream_events_destroy(tcp_stream_t *st) {
  for (int k = 0; k < TCP_RX_SLOTS; k++)
    if (st->rx_ev[k] != NULL)
      cudaEventDestroy(st->rx_ev[k]);
  for (int k = 0; k < 2; k++)
    if (st->tx_ev[k] != NULL)
      cudaEventDestroy(st->tx_ev[k]);
  memset(st->rx_ev, 0, sizeof(st->rx_ev));
  memset(st->tx_ev, 0, sizeof(st->tx_ev));
}

/* One stream's staging: pinned with events when a GPU exists, plain host memory otherwise. */
static cudaError_t stream_stage_alloc(tcp_stream_t *st, int pinned) {
  if (!pinned) {
    st->send_stage = pcl_calloc(1, st->stage_bytes, "tcp send staging");
    st->recv_stage = pcl_calloc(1, st->stage_bytes, "tcp recv staging");
    return (st->send_stage && st->recv_stage) ? cudaSuccess : cudaErrorMemoryAllocation;
  }
  cudaError_t e = cudaHostAlloc(&st->send_stage, st->stage_bytes, 0);
  if (e == cudaSuccess)
    e = cudaHostAlloc(&st->recv_stage, st->stage_bytes, 0);
  for (int k = 0; k < TCP_RX_SLOTS && e == cudaSuccess; k++)
    e = cudaEventCreateWithFlags(&st->rx_ev[k], cudaEventDisableTiming);
  for (int k = 0; k < 2 && e == cudaSuccess; k++)
    e = cudaEventCreateWithFlags(&st->tx_ev[k], cudaEventDisableTiming);
  return e;
}

/* Called once no thread of the connection copies any more: the receivers' copies still in
 * flight end first (they read recv_stage). */
static void stream_stage_free(tcp_stream_t *st, int pinned) {
  if (!pinned) {
    pcl_free(st->send_stage);
    pcl_free(st->recv_stage);
  } else {
    for (int k = 0; k < TCP_RX_SLOTS; k++)
      if (st->rx_used[k] && cudaEventSynchronize(st->rx_ev[k]) != cudaSuccess)
        (void)cudaGetLastError();
    /* A staging copy given up on (pcl_tcp_stage_small at a stop or an abort) may still write
     * into send_stage; an event never recorded is complete at once. */
    for (int k = 0; k < 2; k++)
      if (st->tx_ev[k] != NULL && cudaEventSynchronize(st->tx_ev[k]) != cudaSuccess)
        (void)cudaGetLastError();
    stream_events_destroy(st);
    if (st->send_stage)
      cudaFreeHost(st->send_stage);
    if (st->recv_stage)
      cudaFreeHost(st->recv_stage);
  }
  st->send_stage = st->recv_stage = NULL;
}

static void conn_free(tcp_conn_t *c) {
  for (int i = 0; i < TCP_MAX_STREAMS; i++) {
    tcp_stream_t *st = &c->s[i];
    pcl_socket_close(&st->fd);
    stream_stage_free(st, c->stage_pinned);
    if (st->lock_init) {
      pthread_cond_destroy(&st->cond);
      pthread_mutex_destroy(&st->lock);
    }
  }
  if (c->send_stream)
    tcp_streams_put(c->ctx->cuda_dev);
  pcl_free(c);
}

/* The streams' staging (nstreams known) and the device's copy streams. */
static ncclResult_t conn_stage_alloc(tcp_conn_t *c) {
  const int dev = c->ctx->cuda_dev;
  cudaError_t e = cudaSuccess;
  if (dev >= 0) {
    e = cudaSetDevice(dev);
    if (e == cudaSuccess)
      e = tcp_streams_get(dev, &c->send_stream, &c->recv_stream);
    c->stage_pinned = 1;
  }
  for (int i = 0; i < c->nstreams && e == cudaSuccess; i++) {
    tcp_stream_t *st = &c->s[i];
    st->stage_bytes = i == 0 ? TCP_STAGE0_BYTES : TCP_STAGEK_BYTES;
    e = stream_stage_alloc(st, c->stage_pinned);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: cannot set up staging for rank %d (device %d): %s",
             c->ctx->rank, c->peer, dev, cudaGetErrorString(e));
    return dev >= 0 ? ncclUnhandledCudaError : ncclSystemError;
  }
  return ncclSuccess;
}

typedef struct {
  tcp_greet_t want; /* stream and nstreams unused */
  unsigned seen;    /* streams already accepted */
} greet_want_t;

static int greet_ok(const void *got, void *arg) {
  const tcp_greet_t *g = got;
  const greet_want_t *w = arg;
  return g->magic == w->want.magic && g->rank == w->want.rank && g->peer == w->want.peer &&
         g->nstreams == w->want.nstreams && g->stream >= 0 && g->stream < g->nstreams &&
         !(w->seen & (1u << g->stream));
}

/* Lower rank: listens, tells the peer where and how many streams, accepts each greeted one. */
static ncclResult_t conn_listen(tcp_conn_t *c, pcl_socket_wait_t *w) {
  ncclResult_t res = ncclSuccess;
  int lfd = -1;
  char ifname[64];
  pcl_sockaddr_t local;
  tcp_listen_msg_t msg;
  memset(&msg, 0, sizeof(msg));
  msg.nstreams = c->nstreams;
  PCL_CHECK_GOTO(pcl_socket_find_interface(ifname, sizeof(ifname), &local), res, out);
  PCL_CHECK_GOTO(pcl_socket_listen(&local, &lfd, &msg.addr), res, out);
  PCL_CHECK_GOTO(pcl_bootstrap_send(c->ctx->bootstrap, c->peer, TCP_TAG, &msg, sizeof(msg)), res,
                 out);
  /* A stranger on the port (silent or wrong) costs the real peer TCP_GREET_MS at most. */
  greet_want_t want = {{TCP_MAGIC, c->peer, c->ctx->rank, 0, c->nstreams}, 0};
  for (int i = 0; i < c->nstreams; i++) {
    tcp_greet_t g;
    int fd = -1, dropped = 0;
    res = pcl_socket_accept_greeted(lfd, w, TCP_GREET_MS, &g, sizeof(g), greet_ok, &want, &fd,
                                    &dropped);
    if (dropped > 0)
      PCL_WARN(PCL_LOG_NET,
               "tcp rank %d: dropped %d foreign connection(s) while waiting for rank %d",
               c->ctx->rank, dropped, c->peer);
    if (res != ncclSuccess)
      goto out;
    c->s[g.stream].fd = fd;
    want.seen |= 1u << g.stream;
  }
out:
  pcl_socket_close(&lfd);
  return res;
}

/* Higher rank: takes the listener's stream count and connects each stream. */
static ncclResult_t conn_dial(tcp_conn_t *c, pcl_socket_wait_t *w) {
  tcp_listen_msg_t msg;
  PCL_CHECK(pcl_bootstrap_recv(c->ctx->bootstrap, c->peer, TCP_TAG, &msg, sizeof(msg)));
  if (msg.nstreams < 1 || msg.nstreams > TCP_MAX_STREAMS) {
    PCL_WARN(PCL_LOG_NET, "tcp rank %d: rank %d offers %d connections (1..%d)", c->ctx->rank,
             c->peer, msg.nstreams, TCP_MAX_STREAMS);
    return ncclRemoteError;
  }
  if (msg.nstreams != c->nstreams)
    PCL_INFO(PCL_LOG_NET, "tcp rank %d: %d connection(s) to rank %d, as it asks (here %d)",
             c->ctx->rank, msg.nstreams, c->peer, c->nstreams);
  c->nstreams = msg.nstreams;
  for (int i = 0; i < c->nstreams; i++) {
    tcp_greet_t g = {TCP_MAGIC, c->ctx->rank, c->peer, i, c->nstreams};
    PCL_CHECK(pcl_socket_connect(&msg.addr, w, &c->s[i].fd));
    PCL_CHECK(pcl_socket_send(c->s[i].fd, &g, sizeof(g), w));
  }
  return ncclSuccess;
}

static void conn_stop_threads(tcp_conn_t *c) {
  atomic_store(&c->stop, 1);
  for (int i = 0; i < c->nstreams; i++)
    if (c->s[i].fd >= 0)
      shutdown(c->s[i].fd, SHUT_RDWR);
  for (int i = 0; i < c->nstreams; i++) {
    tcp_stream_t *st = &c->s[i];
    if (st->tx_started) {
      pcl_tcp_tx_stop(st);
      pthread_join(st->tx, NULL);
    }
    if (st->rx_started)
      pthread_join(st->rx, NULL);
    st->tx_started = st->rx_started = 0;
  }
}

static ncclResult_t conn_start_threads(tcp_conn_t *c) {
  for (int i = 0; i < c->nstreams; i++) {
    tcp_stream_t *st = &c->s[i];
    int err = pthread_create(&st->rx, NULL, pcl_tcp_rx_main, st);
    st->rx_started = err == 0;
    if (err == 0 && i > 0) {
      err = pthread_create(&st->tx, NULL, pcl_tcp_tx_main, st);
      st->tx_started = err == 0;
    }
    if (err != 0) {
      PCL_WARN(PCL_LOG_NET, "tcp: cannot start a thread of connection %d to rank %d: %s", i,
               c->peer, strerror(err));
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

static ncclResult_t tcp_connect(pcl_transport_ctx_t *ctx, int peer, void **out) {
  ncclResult_t res = ncclSuccess;
  tcp_conn_t *c = NULL;
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
  c->nstreams = (int)pcl_param_tcp_streams();
  for (int i = 0; i < TCP_MAX_STREAMS; i++) {
    tcp_stream_t *st = &c->s[i];
    st->c = c;
    st->idx = i;
    st->fd = -1;
    if (pthread_mutex_init(&st->lock, NULL) == 0 && pthread_cond_init(&st->cond, NULL) == 0) {
      st->lock_init = 1;
    } else {
      PCL_WARN(PCL_LOG_NET, "tcp: cannot create a connection's lock");
      res = ncclSystemError;
      goto err;
    }
  }
  pcl_socket_wait_t w = pcl_socket_wait_default(ctx->abort_flag, what);
  PCL_CHECK_GOTO(ctx->rank < peer ? conn_listen(c, &w) : conn_dial(c, &w), res, err);
  PCL_CHECK_GOTO(conn_stage_alloc(c), res, err);
  PCL_CHECK_GOTO(conn_start_threads(c), res, err);
  PCL_INFO(PCL_LOG_NET, "tcp rank %d: %d connection(s) to rank %d", ctx->rank, c->nstreams, peer);
  *out = c;
  return ncclSuccess;
err:
  conn_stop_threads(c);
  conn_free(c);
  return res;
}

/* A header fenced behind everything issued so far on the other streams. */
static tcp_hdr_t hdr_make(const tcp_conn_t *c, uint32_t type, uint32_t mem_id, uint64_t off,
                          uint64_t arg) {
  tcp_hdr_t h;
  memset(&h, 0, sizeof(h));
  h.type = type;
  h.mem_id = mem_id;
  h.off = off;
  h.arg = arg;
  for (int j = 0; j < c->nstreams; j++)
    h.after[j] = (uint32_t)c->s[j].issued;
  return h;
}

/* A best-effort BYE on one stream: the peer may be gone already (then nothing is lost), and a
 * peer that does not read within ~1 s learns of the teardown as a broken stream instead. */
static void send_bye(tcp_stream_t *st, const tcp_hdr_t *h) {
  size_t done = 0;
  for (int tries = 0; done < sizeof(*h) && tries < 100; tries++) {
    ssize_t r =
        send(st->fd, (const char *)h + done, sizeof(*h) - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      done += (size_t)r;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      struct pollfd p = {.fd = st->fd, .events = POLLOUT, .revents = 0};
      (void)poll(&p, 1, 10);
    } else {
      return;
    }
  }
}

/* Only a connection whose work all went out says goodbye: after an abort, a failure or a drain
 * that gave up, the peer should learn that something went wrong. Called once the proxy thread
 * has stopped, so the outbox and the stripe queues are this thread's to read; with nothing
 * queued the stripe senders are idle and do not write to their sockets. */
static void conn_say_bye(tcp_conn_t *c) {
  if (atomic_load_explicit(&c->tx_error, memory_order_acquire) != ncclSuccess ||
      pcl_abort_requested(c->ctx->abort_flag) || c->out_len != 0)
    return;
  for (int i = 1; i < c->nstreams; i++)
    if (atomic_load_explicit(&c->s[i].sent, memory_order_acquire) != c->s[i].tail)
      return;
  for (int i = 0; i < c->nstreams; i++)
    if (c->s[i].fd >= 0) {
      tcp_hdr_t h = hdr_make(c, TCP_MSG_BYE, 0, 0, 0);
      send_bye(&c->s[i], &h);
    }
}

static void tcp_disconnect(pcl_transport_ctx_t *ctx, void *conn) {
  (void)ctx;
  tcp_conn_t *c = conn;
  if (c == NULL)
    return;
  conn_say_bye(c);
  conn_stop_threads(c);
  conn_free(c);
}

/* A sender thread's failure, reported by the proxy's next call (the thread WARNed it). */
static ncclResult_t tx_failed(tcp_conn_t *c) {
  return (ncclResult_t)atomic_load_explicit(&c->tx_error, memory_order_acquire);
}

/* Sends what waits in the outbox. */
static ncclResult_t out_drain(tcp_conn_t *c) {
  if (c->out_len == 0)
    return ncclSuccess;
  ncclResult_t res = pcl_tcp_send_all(&c->s[0], c->s[0].send_stage, c->out_len);
  c->out_len = 0;
  return res;
}

/* Room for n more bytes in the outbox, sending what waits there when it lacks it. */
static ncclResult_t out_room(tcp_conn_t *c, size_t n) {
  return c->out_len + n <= c->s[0].stage_bytes ? ncclSuccess : out_drain(c);
}

/* A large put in `parts` parts (1: all on stream 0): parts 1.. go to the streams' senders, part
 * 0 leaves from here. Every part is fenced behind what was issued before the put, none behind
 * another part. */
static ncclResult_t put_parts(tcp_conn_t *c, const char *s, int is_device, uint32_t mem_id,
                              uint64_t doff, uint64_t bytes, int parts) {
  uint64_t part = (bytes + (uint64_t)parts - 1) / (uint64_t)parts;
  part = (part + TCP_STRIPE_PART - 1) / TCP_STRIPE_PART * TCP_STRIPE_PART;
  tcp_job_t j0 = {.h = hdr_make(c, TCP_MSG_PUT, mem_id, doff, part < bytes ? part : bytes),
                  .src = s,
                  .is_device = is_device};
  for (int k = 1; k < parts && (uint64_t)k * part < bytes; k++) {
    const uint64_t at = (uint64_t)k * part;
    tcp_job_t j = j0;
    j.src = s + at;
    j.h.off = doff + at;
    j.h.arg = bytes - at < part ? bytes - at : part;
    PCL_CHECK(pcl_tcp_tx_queue(&c->s[k], &j));
    c->s[k].issued++;
  }
  c->s[0].issued++;
  return pcl_tcp_send_job(&c->s[0], &j0);
}

static ncclResult_t tcp_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                            const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  tcp_conn_t *c = conn;
  tcp_stream_t *s0 = &c->s[0];
  const char *s = (const char *)src->base + so;
  PCL_CHECK(tx_failed(c));
  if (bytes <= TCP_OUTBOX_PUT_MAX) {
    tcp_hdr_t h = hdr_make(c, TCP_MSG_PUT, dst->mem_id, doff, bytes);
    PCL_CHECK(out_room(c, sizeof(h) + bytes));
    char *at = (char *)s0->send_stage + c->out_len;
    memcpy(at, &h, sizeof(h));
    if (!src->is_device) {
      memcpy(at + sizeof(h), s, bytes);
    } else {
      cudaError_t e = pcl_tcp_stage_small(s0, at + sizeof(h), s, bytes);
      if (e != cudaSuccess) {
        PCL_WARN(PCL_LOG_NET, "tcp rank %d: staging GPU data failed: %s", c->ctx->rank,
                 cudaGetErrorString(e));
        return ncclUnhandledCudaError;
      }
    }
    c->out_len += sizeof(h) + bytes;
    s0->issued++;
    return ncclSuccess;
  }
  /* Large: what waits goes first (issue order), then this put from its source. */
  PCL_CHECK(out_drain(c));
  return put_parts(c, s, src->is_device, dst->mem_id, doff, bytes,
                   bytes >= TCP_STRIPE_MIN ? c->nstreams : 1);
}

/* A signal leaves at once on stream 0, with whatever waits before it in the outbox. */
static ncclResult_t tcp_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                               uint64_t value) {
  tcp_conn_t *c = conn;
  PCL_CHECK(tx_failed(c));
  tcp_hdr_t h = hdr_make(c, TCP_MSG_SIGNAL, dst->mem_id, off, value);
  PCL_CHECK(out_room(c, sizeof(h)));
  memcpy((char *)c->s[0].send_stage + c->out_len, &h, sizeof(h));
  c->out_len += sizeof(h);
  c->s[0].issued++;
  return out_drain(c);
}

/* Stream 0's sends are synchronous once out of the outbox (every source was read before put
 * returned); the other streams are flushed once their senders sent every part queued. */
static ncclResult_t tcp_flush(void *conn, int *done) {
  tcp_conn_t *c = conn;
  *done = 0;
  PCL_CHECK(tx_failed(c));
  PCL_CHECK(out_drain(c));
  for (int k = 1; k < c->nstreams; k++)
    if (atomic_load_explicit(&c->s[k].sent, memory_order_acquire) != c->s[k].issued)
      return ncclSuccess;
  /* A sender that failed counts its job as sent: look again, after the counts. */
  PCL_CHECK(tx_failed(c));
  *done = 1;
  return ncclSuccess;
}

/* Every proxy loop: a put that no signal followed leaves now. */
static ncclResult_t tcp_progress(void *conn) {
  tcp_conn_t *c = conn;
  PCL_CHECK(tx_failed(c));
  return out_drain(c);
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
