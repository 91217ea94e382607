/* SPDX-License-Identifier: MIT
 * Private to the TCP transport (tcp.c, tcp_rx.c, tcp_tx.c): a connection is 1..TCP_MAX_STREAMS
 * sockets to one peer; large puts are striped over them, and fences keep issue order. */
#ifndef PCL_TCP_INT_H
#define PCL_TCP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "transport.h"

#define TCP_MAX_STREAMS 8
/* Stream 0's staging (its send side is the outbox too); the other streams move only stripes. */
#define TCP_STAGE0_BYTES (4u << 20)
#define TCP_STAGEK_BYTES (2u << 20)
/* Device destinations: the receive staging is RX_SLOTS slots; each chunk read from the socket
 * is copied to the GPU asynchronously from its own slot, so the next one is read meanwhile. */
#define TCP_RX_SLOTS 8
/* Puts up to this size are copied into stream 0's outbox and leave with what follows them. */
#define TCP_OUTBOX_PUT_MAX (64u << 10)
/* A stripe sender's queue of parts waiting to be sent. */
#define TCP_JOBS 64

/* BYE: the last message of every stream of a connection whose side tore down in order (all its
 * work sent). A stream that ends without one lost its peer midway (its process ended, or it
 * aborted): its receiver reports that instead of leaving kernels to wait for data. */
enum { TCP_MSG_PUT = 1, TCP_MSG_SIGNAL = 2, TCP_MSG_BYE = 3 };

/* Every message names the messages of the other streams it must land after: the receiver of
 * stream s applies it once stream j's receiver has applied after[j] messages, for every j != s.
 * The sender fills after[] with what it had issued on each stream before the message (before
 * the whole put, for the parts of one striped put, which are disjoint), so every message takes
 * effect after everything issued before it, on any stream: the transport's ordering contract. */
typedef struct {
  uint32_t type;
  uint32_t mem_id;
  uint64_t off;
  uint64_t arg; /* PUT: bytes; SIGNAL: value */
  uint32_t after[TCP_MAX_STREAMS];
} tcp_hdr_t;

/* One put or part of a striped put: what a stream sends (queued to a sender thread on 1..). */
typedef struct {
  tcp_hdr_t h;
  const char *src;
  int is_device;
} tcp_job_t;

typedef struct tcp_conn tcp_conn_t;

typedef struct {
  tcp_conn_t *c;
  int idx, fd;
  size_t stage_bytes;
  void *send_stage, *recv_stage;
  /* Receiver thread only: rx_ev[k] recorded after the copy out of slot k (rx_used[k]: one was
   * recorded); a slot is refilled only after its event. */
  cudaEvent_t rx_ev[TCP_RX_SLOTS];
  int rx_used[TCP_RX_SLOTS], rx_next;
  /* Messages this stream's receiver has applied (device puts: their copies queued on the
   * device's receive stream). Release by the receiver, acquire by the others' fences. */
  _Atomic uint64_t applied;
  atomic_int rx_done; /* the receiver has exited: fences on this stream can never be met */
  pthread_t rx, tx;
  int rx_started, tx_started;
  /* The sender's copies into send_stage halves (stream 0: the proxy thread's; others: tx's). */
  cudaEvent_t tx_ev[2];
  /* Stripe sender (idx >= 1): jobs[head % TCP_JOBS .. tail) queued under lock. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int lock_init;
  tcp_job_t jobs[TCP_JOBS];
  uint64_t head, tail;   /* under lock; tail - head jobs wait or are being sent */
  _Atomic uint64_t sent; /* jobs fully sent (their source may be reused) */
  uint64_t issued;       /* proxy thread only: messages issued on this stream */
} tcp_stream_t;

struct tcp_conn {
  pcl_transport_ctx_t *ctx;
  int peer, nstreams;
  atomic_int stop;
  /* The first failure of a stripe sender, returned by the proxy's next put, flush or progress. */
  _Atomic int tx_error;
  /* The device's staging streams (shared by every connection on the device). */
  cudaStream_t send_stream, recv_stream;
  int stage_pinned;
  /* Device copies queued by any receiver of this connection; stream 0's receiver synchronises
   * recv_stream before a host-memory signal when it moved past rx_synced (its own). */
  _Atomic uint64_t rx_dev_copies;
  uint64_t rx_synced;
  /* The outbox: stream 0's send_stage[0, out_len) holds messages not sent yet, in issue order.
   * A small put waits there for the signal that usually follows it, so the pair leaves in one
   * send; progress (every proxy loop), flush, a large put and a full outbox send it too. */
  size_t out_len;
  tcp_stream_t s[TCP_MAX_STREAMS];
};

/* tcp_rx.c: the receiver thread of one stream. */
void *pcl_tcp_rx_main(void *arg);
/* tcp_tx.c: the sender thread of a stripe stream, its queue, and device-source staging. */
void *pcl_tcp_tx_main(void *arg);
ncclResult_t pcl_tcp_tx_queue(tcp_stream_t *st, const tcp_job_t *job);
void pcl_tcp_tx_stop(tcp_stream_t *st);
/* Sends `bytes` of device memory at s over st's socket, staged through st's send_stage halves;
 * every copy queued has ended when this returns. */
ncclResult_t pcl_tcp_send_device(tcp_stream_t *st, const char *s, uint64_t bytes);
ncclResult_t pcl_tcp_send_all(tcp_stream_t *st, const void *buf, size_t n);
/* A put's header, then its bytes from host memory or staged from the device (the proxy thread
 * on stream 0, a sender thread on the others). */
ncclResult_t pcl_tcp_send_job(tcp_stream_t *st, const tcp_job_t *job);
/* A connection thread's start: its log identity and the connection's device. */
void pcl_tcp_thread_enter(const tcp_conn_t *c);
/* The proxy thread's blocking copy of n device bytes to host dst on the device's send stream,
 * waited for through stream 0's first event (stream 0's are the proxy's: not in use here), so
 * later copies of other connections on the shared stream do not count. cudaErrorNotReady when
 * the connection stopped or the communicator aborted first. */
cudaError_t pcl_tcp_stage_small(tcp_stream_t *st0, void *dst, const void *src, size_t n);

#endif
