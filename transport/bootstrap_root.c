/* SPDX-License-Identifier: MIT
 * The bootstrap root: a detached thread serving exactly one communicator (collects each rank's
 * listen address, answers each with its ring successor's, exits), and the connection acceptor
 * shared with the rank side. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
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

static const char *const drop_names[PCL_BOOT_DROP_KINDS] = {"foreign magic", "closed early",
                                                            "stalled", "evicted", "unexpected"};

/* Every acceptor's drops by reason, the last slot all of them; relaxed: statistics, read by tests
 * after the threads joined. */
static atomic_ullong drops_total[PCL_BOOT_DROP_KINDS + 1];

uint64_t pcl_boot_drops_total(pcl_boot_drop_t why) {
  return atomic_load_explicit(&drops_total[why], memory_order_relaxed);
}

static void log_summary(pcl_boot_acceptor_t *acc, const char *when) {
  PCL_INFO(PCL_LOG_BOOT,
           "%s: %llu junk connections dropped %s (%llu foreign magic, %llu closed early, %llu "
           "stalled, %llu evicted, %llu unexpected)",
           acc->who, (unsigned long long)acc->ndropped, when,
           (unsigned long long)acc->drops[PCL_BOOT_DROP_FOREIGN],
           (unsigned long long)acc->drops[PCL_BOOT_DROP_CLOSED],
           (unsigned long long)acc->drops[PCL_BOOT_DROP_STALLED],
           (unsigned long long)acc->drops[PCL_BOOT_DROP_EVICTED],
           (unsigned long long)acc->drops[PCL_BOOT_DROP_UNEXPECTED]);
  acc->summarized = acc->ndropped;
  acc->summary_ns = pcl_socket_now_ns();
}

void pcl_boot_acceptor_drop(pcl_boot_acceptor_t *acc, pcl_boot_drop_t why, const char *fmt, ...) {
  acc->drops[why]++;
  acc->ndropped++;
  atomic_fetch_add_explicit(&drops_total[why], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&drops_total[PCL_BOOT_DROP_KINDS], 1, memory_order_relaxed);
  /* Anyone who can reach the port can make us drop connections: only the first few are worth
   * a line each, the rest would let a scanner flood the log. */
  if (acc->ndropped <= PCL_BOOT_DROP_WARNS) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    PCL_WARN(PCL_LOG_BOOT, "%s: dropped a connection: %s (%s)%s", acc->who, msg, drop_names[why],
             acc->ndropped == PCL_BOOT_DROP_WARNS ? "; further drops are counted, summary at INFO"
                                                  : "");
    acc->summarized = acc->ndropped;
    acc->summary_ns = pcl_socket_now_ns();
    return;
  }
  if (pcl_socket_now_ns() - acc->summary_ns >= PCL_BOOT_DROP_SUMMARY_S * 1000000000ull)
    log_summary(acc, "so far");
}

static void drop_pending(pcl_boot_acceptor_t *acc, int i) {
  close(acc->pending[i].fd);
  acc->pending[i] = acc->pending[acc->npending - 1];
  acc->npending--;
}

ncclResult_t pcl_boot_acceptor_add(pcl_boot_acceptor_t *acc, int fd) {
  if (acc->npending == acc->cap) {
    int ncap = acc->cap ? acc->cap * 2 : 8;
    pcl_boot_pending_t *np = pcl_realloc(acc->pending, (size_t)acc->cap, (size_t)ncap, sizeof(*np),
                                         "bootstrap pending connections");
    if (np == NULL) {
      close(fd);
      return ncclSystemError;
    }
    acc->pending = np;
    acc->cap = ncap;
  }
  acc->pending[acc->npending] = (pcl_boot_pending_t){.fd = fd, .since_ns = pcl_socket_now_ns()};
  acc->npending++;
  return ncclSuccess;
}

/* Advances the greeting of pending connection i. 1: complete and valid (removed from the list,
 * returned through fd/hello); 0: not complete yet or dropped (*dropped says which). */
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
        pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_FOREIGN, "magic 0x%llx, expected 0x%llx",
                               (unsigned long long)p->hello.magic, (unsigned long long)acc->magic);
        break;
      }
      *fd = p->fd;
      *hello = p->hello;
      acc->pending[i] = acc->pending[--acc->npending];
      return 1;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (pcl_socket_now_ns() - p->since_ns < PCL_BOOT_GREETING_MS * 1000000ull)
        return 0;
      pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_STALLED, "%zu of %zu greeting bytes in %d ms",
                             p->got, sizeof(p->hello), PCL_BOOT_GREETING_MS);
      break;
    }
    /* Closed or failed before completing its greeting: not one of ours (or a dead one). */
    pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_CLOSED, "closed after %zu of %zu greeting bytes",
                           p->got, sizeof(p->hello));
    break;
  }
  drop_pending(acc, i);
  *dropped = 1;
  return 0;
}

static int max_pending(const pcl_boot_acceptor_t *acc) {
  return acc->max_pending > 0 && acc->max_pending < PCL_BOOT_MAX_PENDING ? acc->max_pending
                                                                         : PCL_BOOT_MAX_PENDING;
}

static int oldest_pending(const pcl_boot_acceptor_t *acc) {
  int o = 0;
  for (int i = 1; i < acc->npending; i++)
    if (acc->pending[i].since_ns < acc->pending[o].since_ns)
      o = i;
  return o;
}

/* Accepts queued connections while there is room; when full, evicts the oldest once it had
 * PCL_BOOT_EVICT_MS to greet, so a flood costs at most max_pending fds and cannot starve later
 * connections for long. */
static ncclResult_t accept_new(pcl_boot_acceptor_t *acc) {
  if (acc->listen_fd < 0)
    return ncclSuccess;
  for (;;) {
    if (acc->npending >= max_pending(acc)) {
      int o = oldest_pending(acc);
      if (pcl_socket_now_ns() - acc->pending[o].since_ns < PCL_BOOT_EVICT_MS * 1000000ull)
        return ncclSuccess;
      pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_EVICTED, "%d connections without a greeting",
                             acc->npending);
      drop_pending(acc, o);
    }
    int nfd = accept4(acc->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (nfd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return ncclSuccess;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        /* Out of fds or memory: leave the rest queued; the pending ones free fds as they go. */
        PCL_INFO(PCL_LOG_BOOT, "%s: accept: %s; retrying", acc->who, strerror(errno));
        return ncclSuccess;
      }
      PCL_WARN(PCL_LOG_BOOT, "%s: accept failed: %s", acc->who, strerror(errno));
      return ncclSystemError;
    }
    PCL_CHECK(pcl_boot_acceptor_add(acc, nfd));
  }
}

ncclResult_t pcl_boot_acceptor_poll(pcl_boot_acceptor_t *acc, int *fd, pcl_boot_hello_t *hello) {
  *fd = -1;
  PCL_CHECK(accept_new(acc));
  for (int i = 0; i < acc->npending;) {
    int dropped;
    if (pending_step(acc, i, fd, hello, &dropped))
      return ncclSuccess;
    if (!dropped)
      i++;
  }
  return ncclSuccess;
}

/* How long the acceptor may sleep: until the first pending greeting expires or, when full, until
 * the oldest may be evicted; capped at ms. */
static int sleep_ms(const pcl_boot_acceptor_t *acc, int ms) {
  if (acc->npending == 0)
    return ms;
  uint64_t now = pcl_socket_now_ns(), since = acc->pending[oldest_pending(acc)].since_ns;
  uint64_t limit_ms = acc->npending >= max_pending(acc) ? PCL_BOOT_EVICT_MS : PCL_BOOT_GREETING_MS;
  uint64_t due = since + limit_ms * 1000000ull;
  uint64_t left = due > now ? (due - now) / 1000000ull + 1 : 0;
  return left < (uint64_t)ms ? (int)left : ms;
}

ncclResult_t pcl_boot_acceptor_next(pcl_boot_acceptor_t *acc, const pcl_socket_wait_t *w, int *fd,
                                    pcl_boot_hello_t *hello) {
  for (;;) {
    PCL_CHECK(pcl_boot_acceptor_poll(acc, fd, hello));
    if (*fd >= 0)
      return ncclSuccess;
    PCL_CHECK(pcl_socket_wait_check(w));
    /* Wait for a new connection (unless full: those wait in the listen queue) or greeting bytes. */
    struct pollfd pfd[PCL_BOOT_MAX_PENDING + 1];
    int np = 0;
    if (acc->listen_fd >= 0 && acc->npending < max_pending(acc))
      pfd[np++] = (struct pollfd){.fd = acc->listen_fd, .events = POLLIN, .revents = 0};
    for (int i = 0; i < acc->npending && np < PCL_BOOT_MAX_PENDING + 1; i++)
      pfd[np++] = (struct pollfd){.fd = acc->pending[i].fd, .events = POLLIN, .revents = 0};
    int ms = 100;
    if (w->deadline_ns != 0) {
      uint64_t now = pcl_socket_now_ns();
      uint64_t left = now < w->deadline_ns ? (w->deadline_ns - now) / 1000000ull + 1 : 0;
      if (left < (uint64_t)ms)
        ms = (int)left;
    }
    if (poll(pfd, (nfds_t)np, sleep_ms(acc, ms)) < 0 && errno != EINTR) {
      PCL_WARN(PCL_LOG_BOOT, "%s: poll failed: %s", w->what, strerror(errno));
      return ncclSystemError;
    }
  }
}

void pcl_boot_acceptor_fini(pcl_boot_acceptor_t *acc) {
  for (int i = 0; i < acc->npending; i++)
    close(acc->pending[i].fd);
  if (acc->ndropped > acc->summarized)
    log_summary(acc, "in total");
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
static int root_file(root_state_t *st, pcl_boot_acceptor_t *acc, int fd,
                     const pcl_boot_hello_t *h) {
  if (h->kind != HELLO_ROOT || h->nranks <= 0 || h->nranks > PCL_BOOT_MAX_RANKS) {
    pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_UNEXPECTED, "a greeting of kind %u, %d ranks",
                           h->kind, h->nranks);
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
    pcl_boot_acceptor_drop(acc, PCL_BOOT_DROP_UNEXPECTED,
                           "rank %d of %d arrived but the communicator has %d ranks%s", h->rank,
                           h->nranks, st->nranks,
                           (h->rank >= 0 && h->rank < st->nranks && st->fds[h->rank] >= 0)
                               ? " and that rank already arrived"
                               : "");
    return 0;
  }
  st->fds[h->rank] = fd;
  memcpy(&st->addrs[h->rank], h->addr, sizeof(pcl_sockaddr_t));
  return 1;
}

int pcl_boot_root_serve(pcl_boot_acceptor_t *acc, int timeout_s,
                        const volatile uint32_t *abort_flag) {
  root_state_t st = {0, NULL, NULL};
  int arrived = 0, failed = 0;
  /* No deadline before the first rank arrives: the id may travel for a long time (NCCL's root
   * waits forever too); afterwards every rank must arrive within the timeout. */
  pcl_socket_wait_t w = {0, abort_flag, "bootstrap root: waiting for the first rank", timeout_s};
  while (st.nranks == 0 || arrived < st.nranks) {
    int fd;
    pcl_boot_hello_t h;
    if (pcl_boot_acceptor_next(acc, &w, &fd, &h) != ncclSuccess) {
      failed = 1;
      break;
    }
    int ok = root_file(&st, acc, fd, &h);
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
  pcl_socket_wait_t rw = {pcl_socket_now_ns() + (uint64_t)timeout_s * 1000000000ull, abort_flag,
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
  pcl_boot_acceptor_fini(acc);
  for (int r = 0; r < st.nranks; r++)
    if (st.fds[r] >= 0)
      close(st.fds[r]);
  pcl_free(st.fds);
  pcl_free(st.addrs);
  return missing < 0 && !failed ? 0 : -1;
}

static void *root_main(void *arg) {
  root_args_t a = *(root_args_t *)arg;
  pcl_free(arg);
  pcl_boot_acceptor_t acc = {.listen_fd = a.listen_fd, .magic = a.magic};
  snprintf(acc.who, sizeof(acc.who), "bootstrap root");
  (void)pcl_boot_root_serve(&acc, a.timeout_s, NULL);
  close(a.listen_fd);
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
