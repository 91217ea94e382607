/* SPDX-License-Identifier: MIT
 * Non-blocking TCP helpers: interface choice, ephemeral listen, and connect/accept/send/recv
 * loops that retry EINTR/EAGAIN, poll the abort flag and give up at a deadline. */
#define _GNU_SOURCE
#include "socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pcl_abort.h"
#include "log.h"
#include "param.h"
#include "pcl_check.h"

/* Poll slice: how often a blocked call looks at the abort flag. */
#define POLL_SLICE_MS 100

uint64_t pcl_socket_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

pcl_socket_wait_t pcl_socket_wait_default(const volatile uint32_t *abort_flag, const char *what) {
  pcl_socket_wait_t w;
  int s = (int)pcl_param_bootstrap_timeout_s();
  w.timeout_s = s;
  w.deadline_ns = pcl_socket_now_ns() + (uint64_t)s * 1000000000ull;
  w.abort_flag = abort_flag;
  w.what = what;
  return w;
}

ncclResult_t pcl_socket_wait_check(const pcl_socket_wait_t *w) {
  if (pcl_abort_requested(w->abort_flag)) {
    PCL_INFO(PCL_LOG_BOOT, "%s: aborted", w->what);
    return ncclInternalError;
  }
  if (w->deadline_ns != 0 && pcl_socket_now_ns() >= w->deadline_ns) {
    PCL_WARN(PCL_LOG_BOOT, "%s: timed out after %d s (PLANCCL_BOOTSTRAP_TIMEOUT_S)", w->what,
             w->timeout_s);
    return ncclRemoteError;
  }
  return ncclSuccess;
}

static int slice_ms(const pcl_socket_wait_t *w) {
  if (w->deadline_ns == 0)
    return POLL_SLICE_MS;
  uint64_t now = pcl_socket_now_ns();
  if (now >= w->deadline_ns)
    return 0;
  uint64_t left = (w->deadline_ns - now) / 1000000ull + 1;
  return left < POLL_SLICE_MS ? (int)left : POLL_SLICE_MS;
}

ncclResult_t pcl_socket_poll(int fd, short events, const pcl_socket_wait_t *w) {
  for (;;) {
    PCL_CHECK(pcl_socket_wait_check(w));
    struct pollfd p = {.fd = fd, .events = events, .revents = 0};
    int r = poll(&p, 1, slice_ms(w));
    if (r < 0 && errno != EINTR) {
      PCL_WARN(PCL_LOG_BOOT, "%s: poll failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
    if (r > 0)
      return ncclSuccess; /* errors/hangups are reported by the following I/O call */
  }
}

/* ---- addresses and interfaces ---- */

socklen_t pcl_socket_addr_len(const pcl_sockaddr_t *a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

const char *pcl_socket_addr_str(const pcl_sockaddr_t *a, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &a->sin.sin_addr, host, sizeof(host));
    snprintf(buf, len, "%s:%u", host, ntohs(a->sin.sin_port));
  } else if (a->sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &a->sin6.sin6_addr, host, sizeof(host));
    snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6.sin6_port));
  } else {
    snprintf(buf, len, "<family %d>", a->sa.sa_family);
  }
  return buf;
}

/* One comma-separated element against the name: "=" exact, else prefix. */
static int match_one(const char *elem, size_t n, int exact, const char *ifname) {
  if (n == 0)
    return 0;
  if (exact)
    return strlen(ifname) == n && strncmp(elem, ifname, n) == 0;
  return strncmp(elem, ifname, n) == 0;
}

int pcl_socket_ifname_match(const char *spec, const char *ifname) {
  int exclude = 0, exact = 0;
  if (*spec == '^') {
    exclude = 1;
    spec++;
  }
  if (*spec == '=') {
    exact = 1;
    spec++;
  }
  int hit = 0;
  while (*spec != '\0') {
    const char *comma = strchr(spec, ',');
    size_t n = comma ? (size_t)(comma - spec) : strlen(spec);
    if (match_one(spec, n, exact, ifname))
      hit = 1;
    spec += n;
    if (*spec == ',')
      spec++;
  }
  return exclude ? !hit : hit;
}

static int usable_addr(const struct ifaddrs *ifa) {
  if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP))
    return 0;
  if (ifa->ifa_addr->sa_family == AF_INET)
    return 1;
  if (ifa->ifa_addr->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ifa->ifa_addr;
    return !IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr); /* needs a scope id: not portable across hosts */
  }
  return 0;
}

static int auto_class(const struct ifaddrs *ifa) {
  /* 0 = preferred, 1 = loopback, 2 = never in automatic mode. */
  if (strncmp(ifa->ifa_name, "docker", 6) == 0 || strncmp(ifa->ifa_name, "virbr", 5) == 0)
    return 2;
  if (ifa->ifa_flags & IFF_LOOPBACK)
    return 1;
  return 0;
}

/* The first interface found is logged once per process; threads of several ranks find theirs
 * concurrently, so the flag is taken under a lock (the values are the caller's own). */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_done;
static void log_interface(const char *ifname, const pcl_sockaddr_t *addr) {
  char where[64];
  pthread_mutex_lock(&log_lock);
  int first = !log_done;
  log_done = 1;
  pthread_mutex_unlock(&log_lock);
  if (!first)
    return;
  pcl_socket_addr_str(addr, where, sizeof(where));
  PCL_INFO(PCL_LOG_BOOT, "bootstrap: using interface %s:%s", ifname, where);
}

ncclResult_t pcl_socket_find_interface(char *ifname, size_t ifname_len, pcl_sockaddr_t *addr) {
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) {
    PCL_WARN(PCL_LOG_BOOT, "getifaddrs failed: %s", strerror(errno));
    return ncclSystemError;
  }
  const char *spec = pcl_param_socket_ifname();
  const struct ifaddrs *best = NULL;
  int best_rank = 1000;
  for (const struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    if (!usable_addr(ifa))
      continue;
    /* IPv4 before IPv6 on the same class; earlier interfaces before later ones. */
    int fam = ifa->ifa_addr->sa_family == AF_INET ? 0 : 1;
    int rank;
    if (spec != NULL) {
      if (!pcl_socket_ifname_match(spec, ifa->ifa_name))
        continue;
      rank = fam;
    } else {
      int cls = auto_class(ifa);
      if (cls == 2)
        continue;
      rank = cls * 2 + fam;
    }
    if (rank < best_rank) {
      best = ifa;
      best_rank = rank;
    }
  }
  if (best == NULL) {
    freeifaddrs(list);
    PCL_WARN(PCL_LOG_BOOT, "no usable network interface%s%s",
             spec ? " matches PLANCCL_SOCKET_IFNAME=" : "", spec ? spec : "");
    return ncclInvalidUsage;
  }
  memset(addr, 0, sizeof(*addr));
  if (best->ifa_addr->sa_family == AF_INET)
    memcpy(&addr->sin, best->ifa_addr, sizeof(struct sockaddr_in));
  else
    memcpy(&addr->sin6, best->ifa_addr, sizeof(struct sockaddr_in6));
  snprintf(ifname, ifname_len, "%s", best->ifa_name);
  freeifaddrs(list);
  log_interface(ifname, addr);
  return ncclSuccess;
}

/* ---- sockets ---- */

static ncclResult_t set_nonblock_nodelay(int fd, const char *what) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    PCL_WARN(PCL_LOG_BOOT, "%s: fcntl(O_NONBLOCK) failed: %s", what, strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return ncclSuccess;
}

void pcl_socket_close(int *fd) {
  if (fd != NULL && *fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

ncclResult_t pcl_socket_listen(const pcl_sockaddr_t *addr, int *out_fd, pcl_sockaddr_t *bound) {
  ncclResult_t res = ncclSuccess;
  pcl_sockaddr_t a = *addr;
  char s[64];
  if (a.sa.sa_family == AF_INET)
    a.sin.sin_port = 0;
  else
    a.sin6.sin6_port = 0;
  int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    PCL_WARN(PCL_LOG_BOOT, "socket() failed: %s", strerror(errno));
    return ncclSystemError;
  }
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, &a.sa, pcl_socket_addr_len(&a)) != 0) {
    PCL_WARN(PCL_LOG_BOOT, "bind to %s failed: %s", pcl_socket_addr_str(&a, s, sizeof(s)),
             strerror(errno));
    res = ncclSystemError;
    goto err_close;
  }
  if (listen(fd, 16384) != 0) {
    PCL_WARN(PCL_LOG_BOOT, "listen failed: %s", strerror(errno));
    res = ncclSystemError;
    goto err_close;
  }
  socklen_t len = sizeof(*bound);
  memset(bound, 0, sizeof(*bound));
  if (getsockname(fd, &bound->sa, &len) != 0) {
    PCL_WARN(PCL_LOG_BOOT, "getsockname failed: %s", strerror(errno));
    res = ncclSystemError;
    goto err_close;
  }
  PCL_CHECK_GOTO(set_nonblock_nodelay(fd, "listen"), res, err_close);
  *out_fd = fd;
  return ncclSuccess;
err_close:
  close(fd);
  return res;
}

ncclResult_t pcl_socket_connect(const pcl_sockaddr_t *addr, const pcl_socket_wait_t *w,
                                int *out_fd) {
  char s[64];
  uint64_t backoff_ms = 1;
  for (;;) {
    PCL_CHECK(pcl_socket_wait_check(w));
    int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      PCL_WARN(PCL_LOG_BOOT, "%s: socket() failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
    int r;
    do {
      r = connect(fd, &addr->sa, pcl_socket_addr_len(addr));
    } while (r != 0 && errno == EINTR);
    int err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      ncclResult_t res = pcl_socket_poll(fd, POLLOUT, w);
      if (res != ncclSuccess) {
        close(fd);
        return res;
      }
      socklen_t el = sizeof(err);
      if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        err = errno;
    }
    if (err == 0) {
      ncclResult_t res = set_nonblock_nodelay(fd, w->what);
      if (res != ncclSuccess) {
        close(fd);
        return res;
      }
      *out_fd = fd;
      return ncclSuccess;
    }
    close(fd);
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
        err != ECONNRESET && err != EAGAIN) {
      PCL_WARN(PCL_LOG_BOOT, "%s: connect to %s failed: %s", w->what,
               pcl_socket_addr_str(addr, s, sizeof(s)), strerror(err));
      return ncclSystemError;
    }
    /* Not listening (yet) or unreachable: retry with a short backoff until the deadline. */
    struct timespec ts = {0, (long)(backoff_ms * 1000000)};
    nanosleep(&ts, NULL);
    if (backoff_ms < 100)
      backoff_ms *= 2;
  }
}

ncclResult_t pcl_socket_accept(int listen_fd, const pcl_socket_wait_t *w, int *out_fd) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      ncclResult_t res = set_nonblock_nodelay(fd, w->what);
      if (res != ncclSuccess) {
        close(fd);
        return res;
      }
      *out_fd = fd;
      return ncclSuccess;
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      PCL_WARN(PCL_LOG_BOOT, "%s: accept failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
    PCL_CHECK(pcl_socket_poll(listen_fd, POLLIN, w));
  }
}

/* The greeting of one accepted connection: 1 when all `len` bytes came before `end_ns`; quiet
 * (the caller counts drops), since strangers are expected on a listening port. */
static int read_greeting(int fd, void *greet, size_t len, uint64_t end_ns,
                         const volatile uint32_t *abort_flag) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = recv(fd, (char *)greet + got, len - got, 0);
    if (n > 0) {
      got += (size_t)n;
      continue;
    }
    if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
      return 0; /* closed or failed */
    if (errno == EINTR)
      continue;
    uint64_t now = pcl_socket_now_ns();
    if (now >= end_ns || pcl_abort_requested(abort_flag))
      return 0;
    uint64_t left_ms = (end_ns - now) / 1000000ull + 1;
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    (void)poll(&p, 1, left_ms < POLL_SLICE_MS ? (int)left_ms : POLL_SLICE_MS);
  }
  return 1;
}

ncclResult_t pcl_socket_accept_greeted(int listen_fd, const pcl_socket_wait_t *w, int greet_ms,
                                       void *greet, size_t len,
                                       int (*ok)(const void *greet, void *arg), void *arg,
                                       int *out_fd, int *dropped) {
  for (;;) {
    int fd = -1;
    PCL_CHECK(pcl_socket_accept(listen_fd, w, &fd));
    uint64_t end = pcl_socket_now_ns() + (uint64_t)greet_ms * 1000000ull;
    if (w->deadline_ns != 0 && end > w->deadline_ns)
      end = w->deadline_ns;
    if (read_greeting(fd, greet, len, end, w->abort_flag) && ok(greet, arg)) {
      *out_fd = fd;
      return ncclSuccess;
    }
    close(fd);
    if (dropped != NULL)
      (*dropped)++;
    PCL_CHECK(pcl_socket_wait_check(w));
  }
}

ncclResult_t pcl_socket_progress_send(int fd, const void *buf, size_t bytes, size_t *done,
                                      const char *what) {
  while (*done < bytes) {
    ssize_t n = send(fd, (const char *)buf + *done, bytes - *done, MSG_NOSIGNAL);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return ncclSuccess;
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      PCL_WARN(PCL_LOG_BOOT, "%s: connection closed by the peer (%s)", what, strerror(errno));
      return ncclRemoteError;
    }
    PCL_WARN(PCL_LOG_BOOT, "%s: send failed: %s", what, strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t pcl_socket_progress_recv(int fd, void *buf, size_t bytes, size_t *done,
                                      const char *what) {
  while (*done < bytes) {
    ssize_t n = recv(fd, (char *)buf + *done, bytes - *done, 0);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if (n == 0) {
      PCL_WARN(PCL_LOG_BOOT, "%s: connection closed by the peer (did it exit?)", what);
      return ncclRemoteError;
    }
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return ncclSuccess;
    if (errno == ECONNRESET) {
      PCL_WARN(PCL_LOG_BOOT, "%s: connection reset by the peer (did it exit?)", what);
      return ncclRemoteError;
    }
    PCL_WARN(PCL_LOG_BOOT, "%s: recv failed: %s", what, strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t pcl_socket_send_stall(int fd, const void *buf, size_t bytes, pcl_socket_wait_t *w,
                                   uint64_t stall_ns) {
  size_t done = 0;
  for (;;) {
    const size_t before = done;
    PCL_CHECK(pcl_socket_progress_send(fd, buf, bytes, &done, w->what));
    if (done == bytes)
      return ncclSuccess;
    if (stall_ns != 0 && done != before && w->deadline_ns != 0)
      w->deadline_ns = pcl_socket_now_ns() + stall_ns;
    PCL_CHECK(pcl_socket_poll(fd, POLLOUT, w));
  }
}

ncclResult_t pcl_socket_send(int fd, const void *buf, size_t bytes, const pcl_socket_wait_t *w) {
  pcl_socket_wait_t fixed = *w; /* stall 0: the deadline never moves */
  return pcl_socket_send_stall(fd, buf, bytes, &fixed, 0);
}

ncclResult_t pcl_socket_recv(int fd, void *buf, size_t bytes, const pcl_socket_wait_t *w) {
  size_t done = 0;
  for (;;) {
    PCL_CHECK(pcl_socket_progress_recv(fd, buf, bytes, &done, w->what));
    if (done == bytes)
      return ncclSuccess;
    PCL_CHECK(pcl_socket_poll(fd, POLLIN, w));
  }
}

ncclResult_t pcl_socket_sendrecv(int sfd, const void *sbuf, size_t sbytes, int rfd, void *rbuf,
                                 size_t rbytes, const pcl_socket_wait_t *w) {
  size_t sdone = 0, rdone = 0;
  for (;;) {
    PCL_CHECK(pcl_socket_progress_send(sfd, sbuf, sbytes, &sdone, w->what));
    PCL_CHECK(pcl_socket_progress_recv(rfd, rbuf, rbytes, &rdone, w->what));
    if (sdone == sbytes && rdone == rbytes)
      return ncclSuccess;
    PCL_CHECK(pcl_socket_wait_check(w));
    struct pollfd p[2] = {{.fd = sfd, .events = sdone < sbytes ? POLLOUT : 0, .revents = 0},
                          {.fd = rfd, .events = rdone < rbytes ? POLLIN : 0, .revents = 0}};
    if (poll(p, 2, slice_ms(w)) < 0 && errno != EINTR) {
      PCL_WARN(PCL_LOG_BOOT, "%s: poll failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
  }
}
