/* SPDX-License-Identifier: MIT
 * The rank side of the bootstrap: rendezvous through the root, the ring (all-gather, broadcast,
 * barrier), tagged point-to-point messages over lazily opened per-peer connections, and split. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "bootstrap_int.h"
#include "log.h"
#include "pcl_check.h"

#define TAG_SPLIT (-2)

typedef struct msg {
  struct msg *next;
  int peer, tag;
  size_t bytes;
  void *data;
} msg_t;

struct pcl_bootstrap {
  uint64_t magic;
  int rank, nranks;
  volatile uint32_t *abort_flag;
  int listen_fd;
  pcl_sockaddr_t listen_addr;
  int ring_send_fd, ring_recv_fd;
  pcl_sockaddr_t *peer_addrs; /* per rank: listen address */
  int *send_fd;               /* per rank: our P2P connection to it, -1 until opened */
  int *recv_fd;               /* per rank: its P2P connection to us, -1 until accepted */
  pcl_boot_acceptor_t acc;
  msg_t *uq_head, *uq_tail; /* unexpected messages, in arrival order */
  char what[192];
};

/* A wait for one blocking step, described for error messages. */
static pcl_socket_wait_t step(pcl_bootstrap_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static pcl_socket_wait_t step(pcl_bootstrap_t *b, const char *fmt, ...) {
  int n = snprintf(b->what, sizeof(b->what), "bootstrap rank %d/%d: ", b->rank, b->nranks);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->what + n, sizeof(b->what) - (size_t)n, fmt, ap);
  va_end(ap);
  return pcl_socket_wait_default(b->abort_flag, b->what);
}

int pcl_bootstrap_rank(const pcl_bootstrap_t *b) {
  return b->rank;
}
int pcl_bootstrap_nranks(const pcl_bootstrap_t *b) {
  return b->nranks;
}

/* Files a P2P connection that arrived while we waited for something else. */
static ncclResult_t file_conn(pcl_bootstrap_t *b, int fd, const pcl_boot_hello_t *h) {
  if (h->kind != HELLO_P2P || h->rank < 0 || h->rank >= b->nranks || h->nranks != b->nranks ||
      b->recv_fd[h->rank] >= 0) {
    pcl_boot_acceptor_drop(&b->acc, PCL_BOOT_DROP_UNEXPECTED, "kind %u, rank %d of %d", h->kind,
                           h->rank, h->nranks);
    close(fd);
    return ncclSuccess;
  }
  b->recv_fd[h->rank] = fd;
  return ncclSuccess;
}

/* Files the connections that arrived since the last look. Called by the ring collectives, so that
 * while the ranks only use the ring, junk does not pile up in the listen queue (where it would
 * stall a later peer's connect once the queue is full). */
static ncclResult_t drain(pcl_bootstrap_t *b) {
  for (;;) {
    int fd;
    pcl_boot_hello_t h;
    PCL_CHECK(pcl_boot_acceptor_poll(&b->acc, &fd, &h));
    if (fd < 0)
      return ncclSuccess;
    PCL_CHECK(file_conn(b, fd, &h));
  }
}

static ncclResult_t hello_send(pcl_bootstrap_t *b, int fd, uint32_t kind,
                               const pcl_socket_wait_t *w) {
  pcl_boot_hello_t h;
  memset(&h, 0, sizeof(h));
  h.magic = b->magic;
  h.kind = kind;
  h.rank = b->rank;
  h.nranks = b->nranks;
  memcpy(h.addr, &b->listen_addr, sizeof(h.addr));
  return pcl_socket_send(fd, &h, sizeof(h), w);
}

static ncclResult_t meet_root(pcl_bootstrap_t *b, const pcl_bootstrap_handle_t *handle,
                              pcl_sockaddr_t *next) {
  ncclResult_t res;
  pcl_sockaddr_t root;
  char s[64];
  int fd = -1;
  memcpy(&root, handle->addr, sizeof(root));
  pcl_socket_wait_t w =
      step(b, "connecting to the root at %s", pcl_socket_addr_str(&root, s, sizeof(s)));
  PCL_CHECK(pcl_socket_connect(&root, &w, &fd));
  PCL_CHECK_GOTO(hello_send(b, fd, HELLO_ROOT, &w), res, out);
  pcl_boot_reply_t rep;
  w = step(b, "waiting for the root (every rank must arrive)");
  /* The root times out first (its clock starts at the first arrival) and names the missing
   * rank; our own deadline is a little later so that clearer reply wins the race. */
  w.deadline_ns += 2000000000ull;
  PCL_CHECK_GOTO(pcl_socket_recv(fd, &rep, sizeof(rep), &w), res, out);
  if (rep.status != 0) {
    PCL_WARN(PCL_LOG_BOOT,
             "bootstrap rank %d/%d: the root gave up: rank %d never arrived within "
             "%d s",
             b->rank, b->nranks, rep.missing, rep.waited_s);
    res = ncclRemoteError;
    goto out;
  }
  memcpy(next, rep.next_addr, sizeof(*next));
  res = ncclSuccess;
out:
  pcl_socket_close(&fd);
  return res;
}

static ncclResult_t connect_ring(pcl_bootstrap_t *b, const pcl_sockaddr_t *next) {
  int nxt = (b->rank + 1) % b->nranks, prv = (b->rank + b->nranks - 1) % b->nranks;
  pcl_socket_wait_t w = step(b, "connecting the ring to rank %d", nxt);
  PCL_CHECK(pcl_socket_connect(next, &w, &b->ring_send_fd));
  PCL_CHECK(hello_send(b, b->ring_send_fd, HELLO_RING, &w));
  w = step(b, "waiting for rank %d to connect the ring", prv);
  while (b->ring_recv_fd < 0) {
    int fd;
    pcl_boot_hello_t h;
    PCL_CHECK(pcl_boot_acceptor_next(&b->acc, &w, &fd, &h));
    if (h.kind == HELLO_RING && h.rank == prv && h.nranks == b->nranks)
      b->ring_recv_fd = fd;
    else
      PCL_CHECK(file_conn(b, fd, &h));
  }
  return ncclSuccess;
}

pcl_boot_acceptor_t *pcl_boot_rank_acceptor(pcl_bootstrap_t *b) {
  return &b->acc;
}

const pcl_sockaddr_t *pcl_boot_rank_listen_addr(const pcl_bootstrap_t *b) {
  return &b->listen_addr;
}

ncclResult_t pcl_boot_rank_alloc(uint64_t magic, int rank, int nranks,
                                 volatile uint32_t *abort_flag, pcl_bootstrap_t **out) {
  pcl_bootstrap_t *b = NULL;
  *out = NULL;
  PCL_CALLOC(b, 1, "bootstrap");
  if (b == NULL)
    return ncclSystemError;
  b->magic = magic;
  b->rank = rank;
  b->nranks = nranks;
  b->abort_flag = abort_flag;
  b->listen_fd = b->ring_send_fd = b->ring_recv_fd = -1;
  b->acc.listen_fd = -1;
  b->acc.magic = magic;
  snprintf(b->acc.who, sizeof(b->acc.who), "bootstrap rank %d/%d", rank, nranks);
  PCL_CALLOC(b->peer_addrs, (size_t)nranks, "bootstrap peer addresses");
  PCL_CALLOC(b->send_fd, (size_t)nranks, "bootstrap send fds");
  PCL_CALLOC(b->recv_fd, (size_t)nranks, "bootstrap recv fds");
  if (b->peer_addrs == NULL || b->send_fd == NULL || b->recv_fd == NULL) {
    pcl_bootstrap_destroy(b);
    return ncclSystemError;
  }
  for (int i = 0; i < nranks; i++)
    b->send_fd[i] = b->recv_fd[i] = -1;
  *out = b;
  return ncclSuccess;
}

ncclResult_t pcl_bootstrap_create(const pcl_bootstrap_handle_t *handle, int rank, int nranks,
                                  volatile uint32_t *abort_flag, pcl_bootstrap_t **out) {
  ncclResult_t res = ncclSuccess;
  pcl_bootstrap_t *b = NULL;
  char ifname[64];
  pcl_sockaddr_t local, next;
  if (!pcl_bootstrap_handle_valid(handle) || nranks <= 0 || rank < 0 || rank >= nranks) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap: invalid arguments (rank %d of %d, handle %s)", rank, nranks,
             pcl_bootstrap_handle_valid(handle) ? "ok" : "invalid");
    return ncclInvalidArgument;
  }
  PCL_CHECK(pcl_boot_rank_alloc(handle->magic, rank, nranks, abort_flag, &b));
  PCL_CHECK_GOTO(pcl_socket_find_interface(ifname, sizeof(ifname), &local), res, err);
  PCL_CHECK_GOTO(pcl_socket_listen(&local, &b->listen_fd, &b->listen_addr), res, err);
  b->acc.listen_fd = b->listen_fd;
  PCL_CHECK_GOTO(meet_root(b, handle, &next), res, err);
  if (nranks > 1)
    PCL_CHECK_GOTO(connect_ring(b, &next), res, err);
  memcpy(&b->peer_addrs[rank], &b->listen_addr, sizeof(pcl_sockaddr_t));
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(b, b->peer_addrs, sizeof(pcl_sockaddr_t)), res, err);
  PCL_INFO(PCL_LOG_BOOT, "bootstrap rank %d/%d connected", rank, nranks);
  *out = b;
  return ncclSuccess;
err:
  pcl_bootstrap_destroy(b);
  return res;
}

void pcl_bootstrap_destroy(pcl_bootstrap_t *b) {
  if (b == NULL)
    return;
  for (int i = 0; i < b->nranks && b->send_fd != NULL && b->recv_fd != NULL; i++) {
    pcl_socket_close(&b->send_fd[i]);
    pcl_socket_close(&b->recv_fd[i]);
  }
  pcl_socket_close(&b->ring_send_fd);
  pcl_socket_close(&b->ring_recv_fd);
  pcl_boot_acceptor_fini(&b->acc);
  pcl_socket_close(&b->listen_fd);
  while (b->uq_head != NULL) {
    msg_t *m = b->uq_head;
    b->uq_head = m->next;
    pcl_free(m->data);
    pcl_free(m);
  }
  pcl_free(b->peer_addrs);
  pcl_free(b->send_fd);
  pcl_free(b->recv_fd);
  pcl_free(b);
}

/* ---- ring collectives ---- */

ncclResult_t pcl_bootstrap_allgather(pcl_bootstrap_t *b, void *all, size_t s) {
  int n = b->nranks, prv = (b->rank + n - 1) % n;
  char *base = all;
  PCL_CHECK(drain(b));
  for (int i = 0; i < n - 1; i++) {
    int sslot = (b->rank - i + n) % n, rslot = (b->rank - i - 1 + n) % n;
    pcl_socket_wait_t w = step(b, "allgather step %d/%d, waiting for rank %d", i + 1, n - 1, prv);
    PCL_CHECK(pcl_socket_sendrecv(b->ring_send_fd, base + (size_t)sslot * s, s, b->ring_recv_fd,
                                  base + (size_t)rslot * s, s, &w));
  }
  return ncclSuccess;
}

ncclResult_t pcl_bootstrap_bcast(pcl_bootstrap_t *b, void *buf, size_t bytes, int root) {
  int n = b->nranks;
  if (root < 0 || root >= n) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap bcast: root %d out of range (%d ranks)", root, n);
    return ncclInvalidArgument;
  }
  if (n == 1 || bytes == 0)
    return ncclSuccess;
  PCL_CHECK(drain(b));
  int nxt = (b->rank + 1) % n, prv = (b->rank + n - 1) % n;
  if (b->rank != root) {
    pcl_socket_wait_t w = step(b, "bcast from rank %d, waiting for rank %d", root, prv);
    PCL_CHECK(pcl_socket_recv(b->ring_recv_fd, buf, bytes, &w));
  }
  if (nxt != root) {
    pcl_socket_wait_t w = step(b, "bcast from rank %d, sending to rank %d", root, nxt);
    PCL_CHECK(pcl_socket_send(b->ring_send_fd, buf, bytes, &w));
  }
  return ncclSuccess;
}

ncclResult_t pcl_bootstrap_barrier(pcl_bootstrap_t *b) {
  if (b->nranks == 1)
    return ncclSuccess;
  char *tok = pcl_calloc((size_t)b->nranks, 1, "bootstrap barrier");
  if (tok == NULL)
    return ncclSystemError;
  ncclResult_t res = pcl_bootstrap_allgather(b, tok, 1);
  pcl_free(tok);
  return res;
}

/* ---- tagged point-to-point ---- */

static ncclResult_t msg_new(int peer, int tag, size_t bytes, msg_t **out) {
  msg_t *m;
  PCL_CALLOC(m, 1, "bootstrap message");
  if (m == NULL)
    return ncclSystemError;
  m->data = pcl_calloc(bytes ? bytes : 1, 1, "bootstrap message data");
  if (m->data == NULL) {
    pcl_free(m);
    return ncclSystemError;
  }
  m->peer = peer;
  m->tag = tag;
  m->bytes = bytes;
  *out = m;
  return ncclSuccess;
}

/* Queued only once complete: a message cut short by a failed receive must not match later. */
static void enqueue(pcl_bootstrap_t *b, msg_t *m) {
  if (b->uq_tail != NULL)
    b->uq_tail->next = m;
  else
    b->uq_head = m;
  b->uq_tail = m;
}

static ncclResult_t p2p_send(pcl_bootstrap_t *b, int peer, int tag, const void *buf, size_t bytes) {
  if (peer < 0 || peer >= b->nranks) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap send: peer %d out of range (%d ranks)", peer, b->nranks);
    return ncclInvalidArgument;
  }
  if (bytes > PCL_BOOT_MAX_MSG_BYTES) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap send: %zu bytes to rank %d exceed the limit of %u", bytes,
             peer, PCL_BOOT_MAX_MSG_BYTES);
    return ncclInvalidArgument;
  }
  if (peer == b->rank) { /* to self: straight into the unexpected queue */
    msg_t *m;
    PCL_CHECK(msg_new(peer, tag, bytes, &m));
    if (bytes)
      memcpy(m->data, buf, bytes);
    enqueue(b, m);
    return ncclSuccess;
  }
  pcl_socket_wait_t w = step(b, "send to rank %d (tag %d)", peer, tag);
  if (b->send_fd[peer] < 0) {
    PCL_CHECK(pcl_socket_connect(&b->peer_addrs[peer], &w, &b->send_fd[peer]));
    ncclResult_t res = hello_send(b, b->send_fd[peer], HELLO_P2P, &w);
    if (res != ncclSuccess) {
      pcl_socket_close(&b->send_fd[peer]);
      return res;
    }
  }
  pcl_boot_msg_hdr_t hdr = {.tag = tag, .pad = 0, .bytes = bytes};
  PCL_CHECK(pcl_socket_send(b->send_fd[peer], &hdr, sizeof(hdr), &w));
  PCL_CHECK(pcl_socket_send(b->send_fd[peer], buf, bytes, &w));
  return ncclSuccess;
}

static ncclResult_t take_queued(pcl_bootstrap_t *b, int peer, int tag, void *buf, size_t bytes,
                                int *found) {
  msg_t *prev = NULL;
  *found = 0;
  for (msg_t *m = b->uq_head; m != NULL; prev = m, m = m->next) {
    if (m->peer != peer || m->tag != tag)
      continue;
    if (m->bytes != bytes) {
      PCL_WARN(PCL_LOG_BOOT,
               "bootstrap rank %d: message from rank %d (tag %d) has %zu bytes, "
               "receiver expects %zu",
               b->rank, peer, tag, m->bytes, bytes);
      return ncclInvalidUsage;
    }
    if (bytes)
      memcpy(buf, m->data, bytes);
    if (prev != NULL)
      prev->next = m->next;
    else
      b->uq_head = m->next;
    if (b->uq_tail == m)
      b->uq_tail = prev;
    pcl_free(m->data);
    pcl_free(m);
    *found = 1;
    return ncclSuccess;
  }
  return ncclSuccess;
}

static ncclResult_t p2p_recv(pcl_bootstrap_t *b, int peer, int tag, void *buf, size_t bytes) {
  int found;
  if (peer < 0 || peer >= b->nranks) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap recv: peer %d out of range (%d ranks)", peer, b->nranks);
    return ncclInvalidArgument;
  }
  PCL_CHECK(take_queued(b, peer, tag, buf, bytes, &found));
  if (found)
    return ncclSuccess;
  if (peer == b->rank) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap rank %d: receive from itself (tag %d) with no matching send",
             b->rank, tag);
    return ncclInvalidUsage;
  }
  pcl_socket_wait_t w =
      step(b, "receive from rank %d (tag %d), waiting for rank %d", peer, tag, peer);
  while (b->recv_fd[peer] < 0) {
    int fd;
    pcl_boot_hello_t h;
    PCL_CHECK(pcl_boot_acceptor_next(&b->acc, &w, &fd, &h));
    PCL_CHECK(file_conn(b, fd, &h));
  }
  for (;;) {
    pcl_boot_msg_hdr_t hdr;
    PCL_CHECK(pcl_socket_recv(b->recv_fd[peer], &hdr, sizeof(hdr), &w));
    if (hdr.tag == tag) {
      if (hdr.bytes != bytes) {
        PCL_WARN(PCL_LOG_BOOT,
                 "bootstrap rank %d: message from rank %d (tag %d) has %llu bytes, "
                 "receiver expects %zu",
                 b->rank, peer, tag, (unsigned long long)hdr.bytes, bytes);
        pcl_socket_close(&b->recv_fd[peer]); /* the stream cannot be resynchronised */
        return ncclInvalidUsage;
      }
      return pcl_socket_recv(b->recv_fd[peer], buf, bytes, &w);
    }
    if (hdr.bytes > PCL_BOOT_MAX_MSG_BYTES) {
      PCL_WARN(PCL_LOG_BOOT,
               "bootstrap rank %d: message from rank %d (tag %d) announces %llu bytes, over the "
               "limit of %u; connection closed",
               b->rank, peer, hdr.tag, (unsigned long long)hdr.bytes, PCL_BOOT_MAX_MSG_BYTES);
      pcl_socket_close(&b->recv_fd[peer]);
      return ncclRemoteError;
    }
    msg_t *m = NULL;
    ncclResult_t res = msg_new(peer, hdr.tag, (size_t)hdr.bytes, &m);
    if (res == ncclSuccess)
      res = pcl_socket_recv(b->recv_fd[peer], m->data, hdr.bytes, &w);
    if (res != ncclSuccess) {
      if (m != NULL) {
        pcl_free(m->data);
        pcl_free(m);
      }
      pcl_socket_close(&b->recv_fd[peer]); /* the stream cannot be resynchronised */
      return res;
    }
    enqueue(b, m);
  }
}

ncclResult_t pcl_bootstrap_send(pcl_bootstrap_t *b, int peer, int tag, const void *buf,
                                size_t bytes) {
  if (tag < 0) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap send: negative tag %d is reserved", tag);
    return ncclInvalidArgument;
  }
  return p2p_send(b, peer, tag, buf, bytes);
}

ncclResult_t pcl_bootstrap_recv(pcl_bootstrap_t *b, int peer, int tag, void *buf, size_t bytes) {
  if (tag < 0) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap recv: negative tag %d is reserved", tag);
    return ncclInvalidArgument;
  }
  return p2p_recv(b, peer, tag, buf, bytes);
}

/* ---- split ---- */

typedef struct {
  int32_t color, key, rank;
} split_info_t;

static int cmp_member(const void *a, const void *b) {
  const split_info_t *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : (x->rank > y->rank);
}

ncclResult_t pcl_bootstrap_split(pcl_bootstrap_t *parent, int color, int key,
                                 pcl_bootstrap_t **child) {
  ncclResult_t res = ncclSuccess;
  int n = parent->nranks;
  split_info_t *all = NULL, *mine = NULL;
  *child = NULL;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap split: invalid color %d", color);
    return ncclInvalidArgument;
  }
  PCL_CALLOC(all, (size_t)n, "split infos");
  PCL_CALLOC(mine, (size_t)n, "split members");
  PCL_PTR_CHECK_GOTO(all, "split infos", res, out);
  PCL_PTR_CHECK_GOTO(mine, "split members", res, out);
  all[parent->rank] = (split_info_t){color, key, parent->rank};
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(parent, all, sizeof(*all)), res, out);
  if (color == NCCL_SPLIT_NOCOLOR)
    goto out;
  int m = 0, me = -1;
  for (int i = 0; i < n; i++)
    if (all[i].color == color)
      mine[m++] = all[i];
  qsort(mine, (size_t)m, sizeof(*mine), cmp_member);
  for (int i = 0; i < m; i++)
    if (mine[i].rank == parent->rank)
      me = i;
  pcl_bootstrap_handle_t h;
  if (me == 0) {
    PCL_CHECK_GOTO(pcl_bootstrap_root_create(&h), res, out);
    for (int i = 1; i < m; i++)
      PCL_CHECK_GOTO(p2p_send(parent, mine[i].rank, TAG_SPLIT, &h, sizeof(h)), res, out);
  } else {
    PCL_CHECK_GOTO(p2p_recv(parent, mine[0].rank, TAG_SPLIT, &h, sizeof(h)), res, out);
  }
  PCL_CHECK_GOTO(pcl_bootstrap_create(&h, me, m, parent->abort_flag, child), res, out);
out:
  pcl_free(all);
  pcl_free(mine);
  return res;
}
