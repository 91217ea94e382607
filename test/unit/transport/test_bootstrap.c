/* SPDX-License-Identifier: MIT
 * Bootstrap tests on loopback: forked and threaded ranks (2..64), every collective's data
 * checked, tags out of order, split, foreign connections, missing and dying ranks, and 1000
 * init/destroy cycles without leaking fds, threads or bytes. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "log.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_abort.h"
#include "pcl_test.h"
#include "socket.h"

static pcl_bootstrap_handle_t g_handle;

/* Waits for every root thread of this process to finish, then for the threads to be gone. */
static void wait_roots(int threads_expected);

static void use_loopback(const char *timeout_s) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  if (timeout_s)
    setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", timeout_s, 1);
  pcl_param_reset();
  /* Resolve now, single-threaded: ranks are forked while root threads run, and a child must not
   * inherit a lock some thread held at fork time. */
  (void)pcl_param_socket_ifname();
  (void)pcl_param_bootstrap_timeout_s();
  (void)pcl_param_host_id();
  (void)pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_BOOT);
}

#define RCHECK(cond, code)                                                                         \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond);            \
      return (code);                                                                               \
    }                                                                                              \
  } while (0)

/* Every operation with its data checked; returns 0 when all is well. */
static int exercise(pcl_bootstrap_t *b, int rank, int n) {
  RCHECK(pcl_bootstrap_rank(b) == rank && pcl_bootstrap_nranks(b) == n, 2);
  /* allgather of 37 ints per rank */
  enum { K = 37 };
  int *all = calloc((size_t)n * K, sizeof(int));
  for (int i = 0; i < K; i++)
    all[rank * K + i] = rank * 1000 + i;
  RCHECK(pcl_bootstrap_allgather(b, all, K * sizeof(int)) == ncclSuccess, 3);
  for (int r = 0; r < n; r++)
    for (int i = 0; i < K; i++)
      RCHECK(all[r * K + i] == r * 1000 + i, 4);
  free(all);
  /* bcast from every root, 3000 bytes */
  for (int root = 0; root < n; root += (n > 8 ? 7 : 1)) {
    unsigned char buf[3000];
    for (int i = 0; i < 3000; i++)
      buf[i] = rank == root ? (unsigned char)(i * 7 + root) : 0;
    RCHECK(pcl_bootstrap_bcast(b, buf, sizeof(buf), root) == ncclSuccess, 5);
    for (int i = 0; i < 3000; i++)
      RCHECK(buf[i] == (unsigned char)(i * 7 + root), 6);
  }
  RCHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 7);
  /* tagged messages: to the next and the one after, tags sent in reverse order */
  int to1 = (rank + 1) % n, to2 = (rank + 2) % n;
  int from1 = (rank + n - 1) % n, from2 = (rank + n - 2) % n;
  for (int t = 4; t >= 0; t--) {
    int v[2] = {rank, t};
    RCHECK(pcl_bootstrap_send(b, to1, t, v, sizeof(v)) == ncclSuccess, 8);
    v[1] = 100 + t;
    RCHECK(pcl_bootstrap_send(b, to2, 100 + t, v, sizeof(v)) == ncclSuccess, 8);
  }
  /* two messages with the same tag keep their order */
  for (int k = 0; k < 2; k++) {
    int v[2] = {rank, 1000 + k};
    RCHECK(pcl_bootstrap_send(b, to1, 50, v, sizeof(v)) == ncclSuccess, 8);
  }
  for (int k = 0; k < 2; k++) {
    int v[2];
    RCHECK(pcl_bootstrap_recv(b, from1, 50, v, sizeof(v)) == ncclSuccess, 9);
    RCHECK(v[0] == from1 && v[1] == 1000 + k, 10);
  }
  for (int t = 0; t < 5; t++) {
    int v[2];
    RCHECK(pcl_bootstrap_recv(b, from2, 100 + t, v, sizeof(v)) == ncclSuccess, 9);
    RCHECK(v[0] == from2 && v[1] == 100 + t, 10);
    RCHECK(pcl_bootstrap_recv(b, from1, t, v, sizeof(v)) == ncclSuccess, 9);
    RCHECK(v[0] == from1 && v[1] == t, 10);
  }
  /* split: three colors, key reverses the order, rank 1 opts out when n > 2 */
  int color = (n > 2 && rank == 1) ? NCCL_SPLIT_NOCOLOR : rank % 3;
  pcl_bootstrap_t *c = NULL;
  RCHECK(pcl_bootstrap_split(b, color, -rank, &c) == ncclSuccess, 11);
  if (color == NCCL_SPLIT_NOCOLOR) {
    RCHECK(c == NULL, 12);
  } else {
    int members[64], m = 0;
    for (int r = n - 1; r >= 0; r--)
      if (r % 3 == color && !(n > 2 && r == 1))
        members[m++] = r;
    RCHECK(c != NULL && pcl_bootstrap_nranks(c) == m, 12);
    int cr = pcl_bootstrap_rank(c);
    RCHECK(members[cr] == rank, 13);
    int *ranks = calloc((size_t)m, sizeof(int));
    ranks[cr] = rank;
    RCHECK(pcl_bootstrap_allgather(c, ranks, sizeof(int)) == ncclSuccess, 14);
    for (int i = 0; i < m; i++)
      RCHECK(ranks[i] == members[i], 15);
    free(ranks);
    RCHECK(pcl_bootstrap_barrier(c) == ncclSuccess, 16);
    pcl_bootstrap_destroy(c);
  }
  RCHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 17);
  return 0;
}

static int rank_full(int rank, int n, void *arg) {
  int64_t outstanding0 = pcl_alloc_outstanding(); /* a forked child inherits the parent's */
  pcl_bootstrap_t *b = NULL;
  RCHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 1);
  int rc = exercise(b, rank, n);
  pcl_bootstrap_destroy(b);
  /* split created roots in this process: they free their state as they finish */
  for (int i = 0; i < 500 && arg == NULL && pcl_bootstrap_roots_active() > 0; i++)
    usleep(10000);
  if (arg == NULL && rc == 0 && pcl_alloc_outstanding() != outstanding0)
    return 20; /* processes */
  return rc;
}

static void run_forked(int n) {
  use_loopback("60");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert(pcl_bootstrap_handle_valid(&g_handle));
  int codes[64];
  int rc = pcl_mp_run(n, rank_full, NULL, 90, codes);
  ck_assert_msg(rc == 0, "%d ranks: failed with %d", n, rc);
}

START_TEST(test_fork_2) {
  run_forked(2);
}
END_TEST
START_TEST(test_fork_3) {
  run_forked(3);
}
END_TEST
START_TEST(test_fork_8) {
  run_forked(8);
}
END_TEST
START_TEST(test_fork_64) {
  run_forked(64);
}
END_TEST

START_TEST(test_single_rank) {
  use_loopback("10");
  pcl_bootstrap_handle_t h;
  pcl_bootstrap_t *b = NULL;
  ck_assert_int_eq(pcl_bootstrap_root_create(&h), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_create(&h, 0, 1, NULL, &b), ncclSuccess);
  int v = 7, w = 0;
  ck_assert_int_eq(pcl_bootstrap_allgather(b, &v, sizeof(v)), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_bcast(b, &v, sizeof(v), 0), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_barrier(b), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_send(b, 0, 3, &v, sizeof(v)), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_recv(b, 0, 3, &w, sizeof(w)), ncclSuccess);
  ck_assert_int_eq(w, 7);
  ck_assert_int_ne(pcl_bootstrap_recv(b, 0, 3, &w, sizeof(w)), ncclSuccess);
  ck_assert_int_ne(pcl_bootstrap_send(b, 1, 3, &v, sizeof(v)), ncclSuccess);
  pcl_bootstrap_destroy(b);
  pcl_bootstrap_destroy(NULL);
  wait_roots(0);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static int rank_threaded(int rank, int n, void *arg) {
  return rank_full(rank, n, (void *)1);
}

START_TEST(test_threads_5) {
  use_loopback("60");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(5, rank_threaded, NULL, NULL), 0);
  wait_roots(0);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  int n = 0;
  if (d == NULL)
    return -1;
  while (readdir(d) != NULL)
    n++;
  closedir(d);
  return n;
}

static void wait_roots(int threads_expected) {
  for (int i = 0; i < 500 && pcl_bootstrap_roots_active() > 0; i++)
    usleep(10000);
  for (int i = 0; i < 200 && threads_expected > 0; i++) {
    if (count_dir("/proc/self/task") <= threads_expected)
      break;
    usleep(10000);
  }
}

static int rank_cycle(int rank, int n, void *arg) {
  pcl_bootstrap_t *b = NULL;
  if (pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) != ncclSuccess)
    return 1;
  int v[2] = {rank, rank};
  int rc =
      pcl_bootstrap_allgather(b, v, sizeof(int)) == ncclSuccess && v[0] == 0 && v[1] == 1 ? 0 : 2;
  pcl_bootstrap_destroy(b);
  return rc;
}

START_TEST(test_cycles_no_leaks) {
  use_loopback("30");
  /* Warm up once so lazily created process state (log, params) is not counted. */
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, rank_cycle, NULL, NULL), 0);
  wait_roots(1);
  int fds0 = count_dir("/proc/self/fd"), th0 = count_dir("/proc/self/task");
  int64_t bytes0 = pcl_alloc_outstanding();
  for (int i = 0; i < 1000; i++) {
    ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
    ck_assert_msg(pcl_mp_run_threads(2, rank_cycle, NULL, NULL) == 0, "cycle %d failed", i);
  }
  wait_roots(th0);
  ck_assert_int_eq(count_dir("/proc/self/task"), th0);
  ck_assert_int_eq(count_dir("/proc/self/fd"), fds0);
  ck_assert_int_eq(pcl_alloc_outstanding(), bytes0);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A stranger connects to the root first with a foreign magic, another stays silent: the job
 * must not notice. */
START_TEST(test_foreign_magic) {
  use_loopback("30");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  pcl_sockaddr_t root;
  memcpy(&root, g_handle.addr, sizeof(root));
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "test stranger");
  int bad = -1, silent = -1, garbage = -1;
  ck_assert_int_eq(pcl_socket_connect(&root, &w, &silent), ncclSuccess);
  ck_assert_int_eq(pcl_socket_connect(&root, &w, &bad), ncclSuccess);
  unsigned char hello[56];
  memset(hello, 0, sizeof(hello));
  uint64_t m = g_handle.magic ^ 0x5a5a;
  memcpy(hello, &m, sizeof(m));
  hello[8] = 1; /* kind root, rank 0, nranks 0 */
  ck_assert_int_eq(pcl_socket_send(bad, hello, sizeof(hello), &w), ncclSuccess);
  ck_assert_int_eq(pcl_socket_connect(&root, &w, &garbage), ncclSuccess);
  ck_assert_int_eq(pcl_socket_send(garbage, "xyz", 3, &w), ncclSuccess);
  pcl_socket_close(&garbage); /* closed before a full greeting */
  ck_assert_int_eq(pcl_mp_run(4, rank_full, NULL, 60, NULL), 0);
  pcl_socket_close(&bad);
  pcl_socket_close(&silent);
  ck_assert(strstr(pcl_log_last_error(), "dropped") != NULL);
}
END_TEST

/* nranks = 3 but rank 2 never comes: the others fail within the timeout, naming rank 2. */
static int rank_missing(int rank, int n, void *arg) {
  if (rank == 2)
    return 0;
  int64_t outstanding0 = pcl_alloc_outstanding();
  pcl_bootstrap_t *b = NULL;
  double t0 = pcl_mp_now();
  ncclResult_t r = pcl_bootstrap_create(&g_handle, rank, n, NULL, &b);
  double dt = pcl_mp_now() - t0;
  RCHECK(r != ncclSuccess && b == NULL, 1);
  RCHECK(dt < 8.0, 2);
  RCHECK(strstr(pcl_log_last_error(), "rank 2 never arrived") != NULL, 3);
  RCHECK(pcl_alloc_outstanding() == outstanding0, 4);
  return 0;
}

START_TEST(test_missing_rank) {
  use_loopback("2");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run(3, rank_missing, NULL, 30, NULL), 0);
}
END_TEST

/* rank 2 of 4 dies after init: everybody else's next collective fails within the timeout. */
static int rank_dies(int rank, int n, void *arg) {
  pcl_bootstrap_t *b = NULL;
  RCHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 1);
  if (rank == 2)
    _exit(0);
  double t0 = pcl_mp_now();
  int v[4] = {0};
  ncclResult_t r = pcl_bootstrap_allgather(b, v, sizeof(int));
  if (r == ncclSuccess)
    r = pcl_bootstrap_barrier(b);
  double dt = pcl_mp_now() - t0;
  RCHECK(r != ncclSuccess, 2);
  RCHECK(dt < 8.0, 3);
  RCHECK(strlen(pcl_log_last_error()) > 0, 4);
  pcl_bootstrap_destroy(b);
  return 0;
}

START_TEST(test_rank_dies) {
  use_loopback("2");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run(4, rank_dies, NULL, 30, NULL), 0);
}
END_TEST

/* An abort flag set while a rank waits ends the wait promptly. */
static volatile uint32_t g_abort;
static void *set_abort(void *p) {
  usleep(200000);
  pcl_abort_set(&g_abort);
  return NULL;
}

START_TEST(test_abort_flag) {
  use_loopback("60");
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  pthread_t th;
  pthread_create(&th, NULL, set_abort, NULL);
  pcl_bootstrap_t *b = NULL;
  double t0 = pcl_mp_now();
  ck_assert_int_ne(pcl_bootstrap_create(&g_handle, 0, 2, &g_abort, &b), ncclSuccess);
  ck_assert(pcl_mp_now() - t0 < 5.0);
  pthread_join(th, NULL);
}
END_TEST

START_TEST(test_ifname_match) {
  ck_assert(pcl_socket_ifname_match("eth", "eth0"));
  ck_assert(!pcl_socket_ifname_match("eth", "ib0"));
  ck_assert(pcl_socket_ifname_match("ib,eth", "eth1"));
  ck_assert(!pcl_socket_ifname_match("^eth", "eth1"));
  ck_assert(pcl_socket_ifname_match("^eth,docker", "ib0"));
  ck_assert(pcl_socket_ifname_match("=eth0", "eth0"));
  ck_assert(!pcl_socket_ifname_match("=eth0", "eth01"));
  ck_assert(!pcl_socket_ifname_match("^=eth0", "eth0"));
  ck_assert(pcl_socket_ifname_match("^=eth0", "eth01"));
  setenv("PLANCCL_SOCKET_IFNAME", "=lo", 1);
  pcl_param_reset();
  char name[64];
  pcl_sockaddr_t a;
  ck_assert_int_eq(pcl_socket_find_interface(name, sizeof(name), &a), ncclSuccess);
  ck_assert_str_eq(name, "lo");
  setenv("PLANCCL_SOCKET_IFNAME", "nosuchif", 1);
  pcl_param_reset();
  ck_assert_int_ne(pcl_socket_find_interface(name, sizeof(name), &a), ncclSuccess);
  unsetenv("PLANCCL_SOCKET_IFNAME");
  pcl_param_reset();
  ck_assert_int_eq(pcl_socket_find_interface(name, sizeof(name), &a), ncclSuccess);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* IPv6 sockets on ::1 (skipped where the host has IPv6 disabled). */
START_TEST(test_socket_ipv6) {
  pcl_sockaddr_t a, bound;
  memset(&a, 0, sizeof(a));
  a.sin6.sin6_family = AF_INET6;
  a.sin6.sin6_addr = in6addr_loopback;
  int lfd = -1, cfd = -1, afd = -1;
  if (pcl_socket_listen(&a, &lfd, &bound) != ncclSuccess)
    return; /* no IPv6 here */
  char s[64];
  ck_assert(strstr(pcl_socket_addr_str(&bound, s, sizeof(s)), "[::1]:") == s);
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "ipv6 test");
  ck_assert_int_eq(pcl_socket_connect(&bound, &w, &cfd), ncclSuccess);
  ck_assert_int_eq(pcl_socket_accept(lfd, &w, &afd), ncclSuccess);
  char msg[6] = "hello", got[6] = "";
  ck_assert_int_eq(pcl_socket_sendrecv(cfd, msg, 6, afd, got, 6, &w), ncclSuccess);
  ck_assert_str_eq(got, "hello");
  /* a closed peer is reported, not a hang */
  pcl_socket_close(&cfd);
  ck_assert_int_ne(pcl_socket_recv(afd, got, 1, &w), ncclSuccess);
  pcl_socket_close(&afd);
  pcl_socket_close(&lfd);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

typedef struct {
  uint64_t magic;
  int32_t a, b;
} greet_t;

static int greet_ok(const void *got, void *want) {
  return memcmp(got, want, sizeof(greet_t)) == 0;
}

static int client(const pcl_sockaddr_t *to, const void *bytes, size_t n) {
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "greeting test client");
  int fd = -1;
  ck_assert_int_eq(pcl_socket_connect(to, &w, &fd), ncclSuccess);
  if (n > 0)
    ck_assert_int_eq(pcl_socket_send(fd, bytes, n, &w), ncclSuccess);
  return fd;
}

/* A listener waiting for one greeting: strangers before the real peer (silent, short, closed,
 * wrong bytes) are dropped after the greeting time each, not held until the overall deadline;
 * with only a silent stranger the call ends at its deadline; the abort flag ends it too. */
/* A reader that takes 64 KiB every 50 ms for about 1.3 s: a send of 1.5 MiB with a 0.5 s stall
 * deadline goes through (bytes keep moving), one with a plain 0.5 s deadline does not. */
typedef struct {
  int fd;
  size_t want;
} slow_reader_t;

static void *slow_read(void *arg) {
  slow_reader_t *r = arg;
  static char buf[64 << 10];
  size_t got = 0;
  while (got < r->want) {
    ssize_t n = read(r->fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    got += (size_t)n;
    usleep(50000);
  }
  r->want = got;
  return NULL;
}

START_TEST(test_send_stall) {
  const size_t bytes = 3u << 19;
  char *msg = calloc(1, bytes);
  ck_assert_ptr_nonnull(msg);
  for (int plain = 0; plain < 2; plain++) {
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 64 << 10;
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    (void)setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK), 0);
    slow_reader_t r = {sv[1], bytes};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, slow_read, &r), 0);
    pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "slow reader");
    w.deadline_ns = pcl_socket_now_ns() + 500000000ull;
    ncclResult_t res = plain ? pcl_socket_send(sv[0], msg, bytes, &w)
                             : pcl_socket_send_stall(sv[0], msg, bytes, &w, 500000000ull);
    close(sv[0]);
    pthread_join(th, NULL);
    close(sv[1]);
    if (plain) {
      ck_assert_int_eq(res, ncclRemoteError);
    } else {
      ck_assert_int_eq(res, ncclSuccess);
      ck_assert_uint_eq(r.want, bytes);
    }
  }
  free(msg);
}
END_TEST

START_TEST(test_accept_greeted) {
  pcl_sockaddr_t a, bound;
  char name[64];
  int lfd = -1, fd = -1, dropped = 0;
  ck_assert_int_eq(pcl_socket_find_interface(name, sizeof(name), &a), ncclSuccess);
  ck_assert_int_eq(pcl_socket_listen(&a, &lfd, &bound), ncclSuccess);
  greet_t want = {0x1122334455667788ull, 3, 4}, wrong = {0x1122334455667788ull, 3, 5}, got;
  int silent = client(&bound, NULL, 0);
  int shortc = client(&bound, &want, 5);
  int closed = client(&bound, &want, 3);
  pcl_socket_close(&closed);
  int bad = client(&bound, &wrong, sizeof(wrong));
  int good = client(&bound, &want, sizeof(want));
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "greeting test");
  double t0 = pcl_mp_now();
  ck_assert_int_eq(
      pcl_socket_accept_greeted(lfd, &w, 300, &got, sizeof(got), greet_ok, &want, &fd, &dropped),
      ncclSuccess);
  double took = pcl_mp_now() - t0;
  ck_assert_int_eq(dropped, 4);
  ck_assert_msg(took < 2.5, "four strangers held the real peer for %.2f s", took);
  /* The connection returned is the real peer's. */
  char c = 'x', r = 0;
  ck_assert_int_eq(pcl_socket_send(good, &c, 1, &w), ncclSuccess);
  ck_assert_int_eq(pcl_socket_recv(fd, &r, 1, &w), ncclSuccess);
  ck_assert_int_eq(r, 'x');
  pcl_socket_close(&fd);
  /* Only a silent stranger: the overall deadline ends the wait. */
  int lone = client(&bound, NULL, 0);
  pcl_socket_wait_t w1 = w;
  w1.deadline_ns = pcl_socket_now_ns() + 700000000ull;
  t0 = pcl_mp_now();
  ck_assert_int_ne(
      pcl_socket_accept_greeted(lfd, &w1, 5000, &got, sizeof(got), greet_ok, &want, &fd, NULL),
      ncclSuccess);
  took = pcl_mp_now() - t0;
  ck_assert_msg(took > 0.5 && took < 2.0, "deadline of 0.7 s took %.2f s", took);
  /* Abort: ends a wait with nobody connecting. */
  volatile uint32_t abort_flag = 1;
  pcl_socket_wait_t w2 = pcl_socket_wait_default(&abort_flag, "greeting test (abort)");
  ck_assert_int_ne(
      pcl_socket_accept_greeted(lfd, &w2, 5000, &got, sizeof(got), greet_ok, &want, &fd, NULL),
      ncclSuccess);
  pcl_socket_close(&lone);
  pcl_socket_close(&silent);
  pcl_socket_close(&shortc);
  pcl_socket_close(&bad);
  pcl_socket_close(&good);
  pcl_socket_close(&lfd);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

#define ADD_TAGGED(t, tags)                                                                        \
  do {                                                                                             \
    TCase *tc = tcase_create(#t);                                                                  \
    tcase_set_timeout(tc, 120);                                                                    \
    if (tags)                                                                                      \
      tcase_set_tags(tc, tags);                                                                    \
    tcase_add_test(tc, t);                                                                         \
    suite_add_tcase(s, tc);                                                                        \
  } while (0)
#define ADD(t) ADD_TAGGED(t, NULL)
/* Cases that fork no ranks: safe under ASan (CK_INCLUDE_TAGS=nofork, see CMakeLists.txt). */
#define ADD_NOFORK(t) ADD_TAGGED(t, "nofork")

/* One case per test so CK_RUN_CASE=<test name> runs one of them. */
int main(void) {
  Suite *s = suite_create("bootstrap");
  ADD_NOFORK(test_ifname_match);
  ADD_NOFORK(test_socket_ipv6);
  ADD_NOFORK(test_accept_greeted);
  ADD_NOFORK(test_send_stall);
  ADD_NOFORK(test_single_rank);
  ADD(test_fork_2);
  ADD(test_fork_3);
  ADD(test_fork_8);
  ADD(test_fork_64);
  ADD_NOFORK(test_threads_5);
  ADD_NOFORK(test_cycles_no_leaks);
  ADD(test_foreign_magic);
  ADD(test_missing_rank);
  ADD(test_rank_dies);
  ADD_NOFORK(test_abort_flag);
  return pcl_test_run_suite(s);
}
