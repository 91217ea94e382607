/* SPDX-License-Identifier: MIT
 * Private to the bootstrap: wire format, the acceptor that keeps silent, stalling, foreign or
 * flooding connections from blocking others or exhausting fds, and entry points for the fuzzers. */
#ifndef PCL_BOOTSTRAP_INT_H
#define PCL_BOOTSTRAP_INT_H

#include <stdint.h>
#include "bootstrap.h"
#include "socket.h"

enum { HELLO_ROOT = 1, HELLO_RING = 2, HELLO_P2P = 3 };

/* Largest communicator a greeting may announce: bounds what a root allocates for one hello. */
#define PCL_BOOT_MAX_RANKS (1 << 20)

/* First bytes of every bootstrap connection. */
typedef struct {
  uint64_t magic;
  uint32_t kind;
  int32_t rank;
  int32_t nranks;
  uint32_t pad;
  uint8_t addr[28]; /* HELLO_ROOT: where the rank listens */
  uint8_t pad2[4];
} pcl_boot_hello_t;
_Static_assert(sizeof(pcl_boot_hello_t) == 56, "hello layout");
_Static_assert(sizeof(pcl_sockaddr_t) == 28, "sockaddr fits the handle");

/* The root's answer to each rank. status 0: next_addr is the ring successor's listen address;
 * status 1: the root gave up waiting, `missing` is the first rank that never arrived. */
typedef struct {
  int32_t status;
  int32_t missing;
  int32_t waited_s;
  uint8_t next_addr[28];
} pcl_boot_reply_t;
_Static_assert(sizeof(pcl_boot_reply_t) == 40, "reply layout");

/* Largest tagged P2P message (the bootstrap carries setup records of a few hundred bytes): a
 * header announcing more is refused before anything is allocated for it. */
#define PCL_BOOT_MAX_MSG_BYTES (16u << 20)

/* Header of each tagged message on a P2P connection. */
typedef struct {
  int32_t tag;
  uint32_t pad;
  uint64_t bytes;
} pcl_boot_msg_hdr_t;

/* Bounds on accepted connections whose greeting is incomplete. A real rank sends its greeting
 * right after connecting, so only junk waits long: a greeting must complete within
 * PCL_BOOT_GREETING_MS, and when PCL_BOOT_MAX_PENDING connections wait, the oldest is evicted once
 * it waited PCL_BOOT_EVICT_MS (until then new connections stay in the kernel's listen queue). */
#define PCL_BOOT_MAX_PENDING 128
#define PCL_BOOT_GREETING_MS 2000
#define PCL_BOOT_EVICT_MS 50
/* Drops logged at WARN per acceptor; later ones are only counted, summarised at INFO every
 * PCL_BOOT_DROP_SUMMARY_S and when the acceptor is closed. */
#define PCL_BOOT_DROP_WARNS 3
#define PCL_BOOT_DROP_SUMMARY_S 10

/* Why a connection was dropped (counted per acceptor and per process). */
typedef enum {
  PCL_BOOT_DROP_FOREIGN,    /* wrong magic */
  PCL_BOOT_DROP_CLOSED,     /* closed or failed before a full greeting */
  PCL_BOOT_DROP_STALLED,    /* greeting not complete within PCL_BOOT_GREETING_MS */
  PCL_BOOT_DROP_EVICTED,    /* evicted to make room (flood) */
  PCL_BOOT_DROP_UNEXPECTED, /* right magic, but not a greeting this side expects */
  PCL_BOOT_DROP_KINDS
} pcl_boot_drop_t;

typedef struct {
  int fd;
  size_t got;
  uint64_t since_ns; /* accepted at (CLOCK_MONOTONIC) */
  pcl_boot_hello_t hello;
} pcl_boot_pending_t;

/* Accepted connections whose greeting is not complete yet. Zero-initialise, then set listen_fd
 * (-1: none; connections then only come from pcl_boot_acceptor_add), magic and who. */
typedef struct {
  int listen_fd;
  uint64_t magic;
  char who[40];    /* "bootstrap root", "bootstrap rank 3/8": prefix of the drop messages */
  int max_pending; /* 0: PCL_BOOT_MAX_PENDING; larger values are clamped to it */
  pcl_boot_pending_t *pending;
  int npending, cap;
  uint64_t drops[PCL_BOOT_DROP_KINDS];
  uint64_t ndropped, summarized; /* summarized: ndropped at the last summary line */
  uint64_t summary_ns;           /* when the last summary line was written */
} pcl_boot_acceptor_t;

/* Returns the next connection with a complete greeting carrying the right magic; other
 * connections are dropped (rate-limited log) and waiting continues until w fails. */
ncclResult_t pcl_boot_acceptor_next(pcl_boot_acceptor_t *acc, const pcl_socket_wait_t *w, int *fd,
                                    pcl_boot_hello_t *hello);
/* One non-blocking pass: accepts what is queued, advances the greetings, drops junk. *fd is a
 * connection with a complete, right-magic greeting, or -1 when there is none now. */
ncclResult_t pcl_boot_acceptor_poll(pcl_boot_acceptor_t *acc, int *fd, pcl_boot_hello_t *hello);
/* Hands an already connected, non-blocking fd to the acceptor (it owns the fd from now on). */
ncclResult_t pcl_boot_acceptor_add(pcl_boot_acceptor_t *acc, int fd);
/* Counts and logs (rate-limited) one dropped connection; the caller closes it. */
void pcl_boot_acceptor_drop(pcl_boot_acceptor_t *acc, pcl_boot_drop_t why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Closes the pending connections (not the listen socket), frees the list, logs the drop total. */
void pcl_boot_acceptor_fini(pcl_boot_acceptor_t *acc);

/* Connections dropped for `why` by every acceptor of this process so far, or for any reason
 * when why is PCL_BOOT_DROP_KINDS (tests and the junk benchmark). */
uint64_t pcl_boot_drops_total(pcl_boot_drop_t why);

/* The root's whole job on acc (which it closes, with every rank connection): collect greetings
 * until every rank arrived (no deadline before the first one, timeout_s after it; abort_flag may
 * be NULL), then reply to each arrived rank. Returns 0 when every rank got its successor. */
int pcl_boot_root_serve(pcl_boot_acceptor_t *acc, int timeout_s,
                        const volatile uint32_t *abort_flag);

/* A rank with its tables but no listen socket, root or ring (pcl_bootstrap_create starts from it;
 * the peer-side fuzzer hands it P2P connections through pcl_boot_rank_acceptor). */
ncclResult_t pcl_boot_rank_alloc(uint64_t magic, int rank, int nranks,
                                 volatile uint32_t *abort_flag, pcl_bootstrap_t **out);
pcl_boot_acceptor_t *pcl_boot_rank_acceptor(pcl_bootstrap_t *b);
/* Where the rank listens for ring and P2P connections (the junk test aims there). */
const pcl_sockaddr_t *pcl_boot_rank_listen_addr(const pcl_bootstrap_t *b);

#endif
