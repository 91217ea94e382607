/* SPDX-License-Identifier: MIT
 * Non-blocking TCP helpers for the bootstrap and the TCP transport: interface choice, listen on
 * an ephemeral port, connect/accept/send/recv with EINTR retry, deadlines and abort polling. */
#ifndef PCL_SOCKET_H
#define PCL_SOCKET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <nccl.h>

/* An IPv4 or IPv6 address; 28 bytes, the size stored in a bootstrap handle. */
typedef union {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
} pcl_sockaddr_t;

/* What a blocking call waits for: an absolute CLOCK_MONOTONIC deadline in ns (0 = none), an
 * abort flag (may be NULL) and a description used in error messages ("rank 2: ring receive from
 * rank 1 in allgather"). */
typedef struct {
  uint64_t deadline_ns;
  const volatile uint32_t *abort_flag;
  const char *what;
  int timeout_s; /* for the message only */
} pcl_socket_wait_t;

uint64_t pcl_socket_now_ns(void);
/* A wait ending PLANCCL_BOOTSTRAP_TIMEOUT_S from now. */
pcl_socket_wait_t pcl_socket_wait_default(const volatile uint32_t *abort_flag, const char *what);

/* Chooses the local interface: PLANCCL_SOCKET_IFNAME (comma list of prefixes, '^' excludes,
 * '=' exact), else the first non-loopback interface that is up (docker* and virbr* skipped), else
 * lo. Fills the interface name and its address (port 0). */
ncclResult_t pcl_socket_find_interface(char *ifname, size_t ifname_len, pcl_sockaddr_t *addr);

/* Matches one interface name against a PLANCCL_SOCKET_IFNAME-style spec (exposed for tests). */
int pcl_socket_ifname_match(const char *spec, const char *ifname);

/* "1.2.3.4:5678" or "[::1]:5678". */
const char *pcl_socket_addr_str(const pcl_sockaddr_t *addr, char *buf, size_t len);
socklen_t pcl_socket_addr_len(const pcl_sockaddr_t *addr);

/* Listens on addr's IP at an ephemeral port; *bound gets the actual address. Non-blocking fd. */
ncclResult_t pcl_socket_listen(const pcl_sockaddr_t *addr, int *fd, pcl_sockaddr_t *bound);
/* Connects (retrying refused/unreachable until the deadline); non-blocking fd, TCP_NODELAY. */
ncclResult_t pcl_socket_connect(const pcl_sockaddr_t *addr, const pcl_socket_wait_t *w, int *fd);
/* Accepts one connection; non-blocking fd, TCP_NODELAY. */
ncclResult_t pcl_socket_accept(int listen_fd, const pcl_socket_wait_t *w, int *fd);
/* Accepts until a connection sends `len` greeting bytes (into greet) within greet_ms that
 * ok(greet, arg) accepts; any other connection (silent, short, closed, wrong) is closed and
 * counted in *dropped (may be NULL), so a stranger delays the real peer by greet_ms at most
 * instead of holding the accept until w's deadline. Bounded by w (deadline, abort). */
ncclResult_t pcl_socket_accept_greeted(int listen_fd, const pcl_socket_wait_t *w, int greet_ms,
                                       void *greet, size_t len,
                                       int (*ok)(const void *greet, void *arg), void *arg, int *fd,
                                       int *dropped);

ncclResult_t pcl_socket_send(int fd, const void *buf, size_t bytes, const pcl_socket_wait_t *w);
/* As pcl_socket_send, but w's deadline bounds a stall, not the whole message: it moves on by
 * `stall_ns` whenever bytes go out (a large message on a slow link is not a failure); 0 keeps
 * it where it is. */
ncclResult_t pcl_socket_send_stall(int fd, const void *buf, size_t bytes, pcl_socket_wait_t *w,
                                   uint64_t stall_ns);
ncclResult_t pcl_socket_recv(int fd, void *buf, size_t bytes, const pcl_socket_wait_t *w);
/* Sends on sfd and receives on rfd at the same time (no deadlock when both sides send first). */
ncclResult_t pcl_socket_sendrecv(int sfd, const void *sbuf, size_t sbytes, int rfd, void *rbuf,
                                 size_t rbytes, const pcl_socket_wait_t *w);

/* Non-blocking progress: moves what it can, adds to *done; returns ncclRemoteError on a closed
 * connection (with a WARN naming what), ncclSystemError on other failures. */
ncclResult_t pcl_socket_progress_send(int fd, const void *buf, size_t bytes, size_t *done,
                                      const char *what);
ncclResult_t pcl_socket_progress_recv(int fd, void *buf, size_t bytes, size_t *done,
                                      const char *what);

/* Waits for fd to become readable/writable (events as in poll) until w expires, abort or ready.
 * Returns ncclSuccess when ready. */
ncclResult_t pcl_socket_poll(int fd, short events, const pcl_socket_wait_t *w);

/* Checks the deadline and the abort flag; logs and fails with the wait's description. */
ncclResult_t pcl_socket_wait_check(const pcl_socket_wait_t *w);

void pcl_socket_close(int *fd);

#endif
