/* SPDX-License-Identifier: MIT
 * The bootstrap root: a detached thread serving exactly one communicator (collects each rank's
 * listen address, answers each with its ring successor's, exits), and the connection acceptor
 * shared with the rank side. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "bootstrap_int.h"
#include "log.h"
#include "param.h"
#include "pcl_check.h"

/* ---- acceptor ---- */

static void drop_pending(pcl_boot_acceptor_t *acc, int i) {
  acc->pending[i] = acc->pending[acc->npending - 1];
  acc->npending--;
}

/* Advances the greeting of pending connection i. 1: complete and valid (removed from the list,
 * returned through fd/hello); 0: not complete yet or dropped. */
static int pending_step(pcl_boot_acceptor_t *acc, int i, int *fd, pcl_boot_hello_t *hello,
                        int *dropped) {
  pcl_boot_pending_t *p = &acc->pending[i];
  *dropped = 0;
  for (;;) {
    ssize_t n = recv(p->fd, (char *)&p->hello + p->got, sizeof(p->hello) - p->got, 0);
    if (n > 0) {
      p->got += (size_t)n;
      if (p->got < sizeof(p->hello))
        continue;
      if (p->hello.magic != acc->magic) {
        PCL_WARN(PCL_LOG_BOOT,
                 "bootstrap: dropped a connection with a foreign magic 0x%llx (expected 0x%llx)",
                 (unsigned long long)p->hello.magic, (unsigned long long)acc->magic);
        close(p->fd);
        drop_pending(acc, i);
        *dropped = 1;
        return 0;
      }
      *fd = p->fd;
      *hello = p->hello;
      drop_pending(acc, i);
      return 1;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    /* Closed or failed before completing its greeting: not one of ours (or a dead one). */
    PCL_WARN(PCL_LOG_BOOT,
             "bootstrap: dropped a connection closed before its greeting (%zu of %zu "
             "bytes)",
             p->got, sizeof(p->hello));
    close(p->fd);
    drop_pending(acc, i);
    *dropped = 1;
    return 0;
  }
}

ncclResult_t pcl_boot_acceptor_next(pcl_boot_acceptor_t *acc, const pcl_socket_wait_t *w, int *fd,
                                    pcl_boot_hello_t *hello) {
  for (;;) {
    /* Drain new connections first, so pending ones never starve the listen queue. */
    for (;;) {
      int nfd = accept4(acc->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (nfd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
          break;
        PCL_WARN(PCL_LOG_BOOT, "%s: accept failed: %s", w->what, strerror(errno));
        return ncclSystemError;
      }
      if (acc->npending == acc->cap) {
        int ncap = acc->cap ? acc->cap * 2 : 8;
        pcl_boot_pending_t *np = pcl_realloc(acc->pending, (size_t)acc->cap, (size_t)ncap,
                                             sizeof(*np), "bootstrap pending connections");
        if (np == NULL) {
          close(nfd);
          return ncclSystemError;
        }
        acc->pending = np;
        acc->cap = ncap;
      }
      acc->pending[acc->npending].fd = nfd;
      acc->pending[acc->npending].got = 0;
      acc->npending++;
    }
    for (int i = 0; i < acc->npending;) {
      int dropped;
      if (pending_step(acc, i, fd, hello, &dropped))
        return ncclSuccess;
      if (!dropped)
        i++;
    }
    PCL_CHECK(pcl_socket_wait_check(w));
    /* Wait for a new connection or more greeting bytes. */
    struct pollfd pfd[17];
    int np = 0;
    pfd[np++] = (struct pollfd){.fd = acc->listen_fd, .events = POLLIN, .revents = 0};
    for (int i = 0; i < acc->npending && np < 17; i++)
      pfd[np++] = (struct pollfd){.fd = acc->pending[i].fd, .events = POLLIN, .revents = 0};
    int ms = 100;
    if (w->deadline_ns != 0) {
      uint64_t now = pcl_socket_now_ns();
      uint64_t left = now < w->deadline_ns ? (w->deadline_ns - now) / 1000000ull + 1 : 0;
      if (left < (uint64_t)ms)
        ms = (int)left;
    }
    if (acc->npending > 16)
      ms = ms < 5 ? ms : 5; /* some pending fds are not polled */
    if (poll(pfd, (nfds_t)np, ms) < 0 && errno != EINTR) {
      PCL_WARN(PCL_LOG_BOOT, "%s: poll failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
  }
}

void pcl_boot_acceptor_fini(pcl_boot_acceptor_t *acc) {
  for (int i = 0; i < acc->npending; i++)
    close(acc->pending[i].fd);
  pcl_free(acc->pending);
  acc->pending = NULL;
  acc->npending = acc->cap = 0;
}

/* ---- root ---- */

typedef struct {
  int listen_fd;
  uint64_t magic;
  int timeout_s; /* read by the creator: the root thread never takes the parameter lock, so a
                  * process forking while it runs cannot inherit that lock held */
} root_args_t;

/* Root threads not yet finished (tests wait for 0 before counting fds, threads and bytes). */
static atomic_int roots_active;

int pcl_bootstrap_roots_active(void) {
  return atomic_load_explicit(&roots_active, memory_order_acquire);
}

typedef struct {
  int nranks;
  int *fds;              /* per rank: the connection it arrived on, -1 until then */
  pcl_sockaddr_t *addrs; /* per rank: its ring listen address */
} root_state_t;

/* Files one greeting; returns 0 if it is not acceptable (logged, caller closes). */
static int root_file(root_state_t *st, int fd, const pcl_boot_hello_t *h) {
  if (h->kind != HELLO_ROOT || h->nranks <= 0) {
    PCL_WARN(PCL_LOG_BOOT, "bootstrap root: dropped a greeting of kind %u", h->kind);
    return 0;
  }
  if (st->nranks == 0) {
    st->nranks = h->nranks;
    PCL_CALLOC(st->fds, (size_t)h->nranks, "bootstrap root fds");
    PCL_CALLOC(st->addrs, (size_t)h->nranks, "bootstrap root addrs");
    if (st->fds == NULL || st->addrs == NULL)
      return -1;
    for (int i = 0; i < h->nranks; i++)
      st->fds[i] = -1;
  }
  if (h->nranks != st->nranks || h->rank < 0 || h->rank >= st->nranks || st->fds[h->rank] >= 0) {
    PCL_WARN(PCL_LOG_BOOT,
             "bootstrap root: rank %d of %d arrived but the communicator has %d "
             "ranks%s; dropped",
             h->rank, h->nranks, st->nranks,
             (h->rank >= 0 && h->rank < st->nranks && st->fds[h->rank] >= 0) ? " and that rank "
                                                                               "already arrived"
                                                                             : "");
    return 0;
  }
  st->fds[h->rank] = fd;
  memcpy(&st->addrs[h->rank], h->addr, sizeof(pcl_sockaddr_t));
  return 1;
}

static void *root_main(void *arg) {
  root_args_t a = *(root_args_t *)arg;
  pcl_free(arg);
  root_state_t st = {0, NULL, NULL};
  pcl_boot_acceptor_t acc = {.listen_fd = a.listen_fd, .magic = a.magic};
  int arrived = 0, failed = 0;
  int timeout_s = a.timeout_s;
  /* No deadline before the first rank arrives: the id may travel for a long time (NCCL's root
   * waits forever too); afterwards every rank must arrive within the timeout. */
  pcl_socket_wait_t w = {0, NULL, "bootstrap root: waiting for the first rank", timeout_s};
  while (st.nranks == 0 || arrived < st.nranks) {
    int fd;
    pcl_boot_hello_t h;
    if (pcl_boot_acceptor_next(&acc, &w, &fd, &h) != ncclSuccess) {
      failed = 1;
      break;
    }
    int ok = root_file(&st, fd, &h);
    if (ok < 0) {
      close(fd);
      failed = 1;
      break;
    }
    if (ok == 0) {
      close(fd);
      continue;
    }
    if (arrived++ == 0) {
      w.deadline_ns = pcl_socket_now_ns() + (uint64_t)timeout_s * 1000000000ull;
      w.what = "bootstrap root: waiting for every rank to arrive";
    }
  }
  /* One reply per arrived rank: its successor's address, or the first missing rank. */
  pcl_boot_reply_t rep;
  memset(&rep, 0, sizeof(rep));
  int missing = -1;
  for (int r = 0; r < st.nranks; r++)
    if (st.fds[r] < 0 && missing < 0)
      missing = r;
  if (missing >= 0)
    PCL_WARN(PCL_LOG_BOOT, "bootstrap root: rank %d of %d never arrived within %d s (%d arrived)",
             missing, st.nranks, timeout_s, arrived);
  pcl_socket_wait_t rw = {pcl_socket_now_ns() + (uint64_t)timeout_s * 1000000000ull, NULL,
                          "bootstrap root: replying to the ranks", timeout_s};
  for (int r = 0; r < st.nranks; r++) {
    if (st.fds[r] < 0)
      continue;
    rep.status = (missing >= 0 || failed) ? 1 : 0;
    rep.missing = missing;
    rep.waited_s = timeout_s;
    memcpy(rep.next_addr, &st.addrs[(r + 1) % st.nranks], sizeof(rep.next_addr));
    (void)pcl_socket_send(st.fds[r], &rep, sizeof(rep), &rw); /* a dead rank is its own problem */
  }
  pcl_boot_acceptor_fini(&acc);
  close(a.listen_fd);
  for (int r = 0; r < st.nranks; r++)
    if (st.fds[r] >= 0)
      close(st.fds[r]);
  pcl_free(st.fds);
  pcl_free(st.addrs);
  atomic_fetch_sub_explicit(&roots_active, 1, memory_order_release);
  return NULL;
}

int pcl_bootstrap_handle_valid(const pcl_bootstrap_handle_t *h) {
  if (h == NULL || h->magic == 0)
    return 0;
  pcl_sockaddr_t a;
  memcpy(&a, h->addr, sizeof(a));
  return a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6;
}

ncclResult_t pcl_bootstrap_root_create(pcl_bootstrap_handle_t *handle) {
  ncclResult_t res = ncclSuccess;
  char ifname[64];
  char s[64];
  pcl_sockaddr_t addr, bound;
  int fd = -1;
  root_args_t *args = NULL;
  uint64_t magic = 0;
  while (magic == 0) {
    if (getrandom(&magic, sizeof(magic), 0) != (ssize_t)sizeof(magic)) {
      PCL_WARN(PCL_LOG_BOOT, "getrandom failed: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  PCL_CHECK(pcl_socket_find_interface(ifname, sizeof(ifname), &addr));
  PCL_CHECK(pcl_socket_listen(&addr, &fd, &bound));
  PCL_CALLOC(args, 1, "bootstrap root args");
  PCL_PTR_CHECK_GOTO(args, "bootstrap root args", res, err_close);
  args->listen_fd = fd;
  args->magic = magic;
  args->timeout_s = (int)pcl_param_bootstrap_timeout_s();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  atomic_fetch_add_explicit(&roots_active, 1, memory_order_relaxed);
  int err = pthread_create(&th, &attr, root_main, args);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    atomic_fetch_sub_explicit(&roots_active, 1, memory_order_relaxed);
    PCL_WARN(PCL_LOG_BOOT, "cannot start the bootstrap root thread: %s", strerror(err));
    res = ncclSystemError;
    goto err_free;
  }
  memset(handle, 0, sizeof(*handle));
  handle->magic = magic;
  memcpy(handle->addr, &bound, sizeof(bound));
  PCL_INFO(PCL_LOG_BOOT, "bootstrap root listening on %s:%s", ifname,
           pcl_socket_addr_str(&bound, s, sizeof(s)));
  return ncclSuccess;
err_free:
  pcl_free(args);
err_close:
  close(fd);
  return res;
}
