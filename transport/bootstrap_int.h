/* SPDX-License-Identifier: MIT
 * Private to the bootstrap: the wire format of connection greetings and root replies, and the
 * acceptor that identifies incoming connections (magic check) without letting a silent or
 * foreign connection block the others. */
#ifndef PCL_BOOTSTRAP_INT_H
#define PCL_BOOTSTRAP_INT_H

#include <stdint.h>
#include "socket.h"

enum { HELLO_ROOT = 1, HELLO_RING = 2, HELLO_P2P = 3 };

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

/* Header of each tagged message on a P2P connection. */
typedef struct {
  int32_t tag;
  uint32_t pad;
  uint64_t bytes;
} pcl_boot_msg_hdr_t;

typedef struct {
  int fd;
  size_t got;
  pcl_boot_hello_t hello;
} pcl_boot_pending_t;

/* Accepted connections whose greeting is not complete yet. */
typedef struct {
  int listen_fd;
  uint64_t magic;
  pcl_boot_pending_t *pending;
  int npending, cap;
} pcl_boot_acceptor_t;

/* Returns the next connection with a complete greeting carrying the right magic; connections
 * with another magic, or closed before greeting, are dropped (WARN) and waiting continues. */
ncclResult_t pcl_boot_acceptor_next(pcl_boot_acceptor_t *acc, const pcl_socket_wait_t *w, int *fd,
                                    pcl_boot_hello_t *hello);
/* Closes the pending connections (not the listen socket) and frees the list. */
void pcl_boot_acceptor_fini(pcl_boot_acceptor_t *acc);

#endif
