/* SPDX-License-Identifier: MIT
 * 10,000 junk connections at the bootstrap root during init and at the ranks while 4 threads loop
 * over checked collectives: the job completes, fds stay bounded, the log stays short. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "bootstrap_int.h"
#include "log.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_test.h"
#include "socket.h"

#define NRANKS 4
#define NJUNK 10000
#define INIT_HEAD 1500 /* junk connections before the first rank starts */
/* Stalling and silent connections kept open at once (more than PCL_BOOT_MAX_PENDING). */
#define STALLS 200
/* Stalling senders at the ranks held open STALL_MS, longer than PCL_BOOT_GREETING_MS: the acceptor
 * must give up on them first. */
#define LONG_STALLS 16
#define STALL_MS 3000
#define HOLD_MS 100

static pcl_bootstrap_handle_t g_handle;
static pcl_sockaddr_t g_rank_addr[NRANKS];
static atomic_int g_ranks_up;  /* ranks whose listen address is published */
static atomic_int g_junk_sent; /* junk connections attempted */
static atomic_int g_junk_done; /* 1 once the junk thread finished */
static atomic_int g_iters[NRANKS];
static double g_t_init[NRANKS];
static double g_t_clean; /* rank 0: seconds for CLEAN_ROUNDS rounds after the junk */
#define CLEAN_ROUNDS 300

typedef struct {
  int connected, refused;
  double seconds;        /* to send all the junk */
  double rank_phase_s;   /* of which at the ranks, while they ran */
  int rank_phase_rounds; /* rounds rank 0 completed meanwhile */
  int peak_fds;          /* most fds open in this process (junk ends included), sampled */
} junk_stats_t;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { /* xorshift64: reproducible junk */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Non-blocking connect with a short bound; -1 when refused or not accepted in time. */
static int junk_connect(const pcl_sockaddr_t *a) {
  int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, &a->sa, pcl_socket_addr_len(a)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
  int err = 0;
  socklen_t el = sizeof(err);
  if (poll(&p, 1, 1000) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

typedef struct {
  int fd;
  double since;
} stall_t;

/* Sends junk of kind k on fd; returns 1 when the connection is to stay open (stalling, silent). */
static int junk_one(int fd, int k) {
  uint8_t buf[256];
  size_t len = 0;
  pcl_boot_hello_t h;
  memset(&h, 0, sizeof(h));
  h.magic = g_handle.magic ^ (rnd() | 1); /* never the right one */
  h.kind = HELLO_ROOT;
  h.nranks = NRANKS;
  memcpy(buf, &h, sizeof(h));
  switch (k) {
  case 0: /* random bytes */
    len = 1 + rnd() % sizeof(buf);
    for (size_t i = 0; i < len; i++)
      buf[i] = (uint8_t)rnd();
    break;
  case 1: /* a whole greeting with a wrong magic */
    len = sizeof(h);
    break;
  case 2: /* truncated greeting */
    len = 1 + rnd() % (sizeof(h) - 1);
    break;
  case 3: /* connect and close */
    break;
  case 4: /* stalling sender: part of a greeting, then nothing */
    len = 1 + rnd() % 20;
    break;
  default: /* silent flood: connected, never a byte */
    break;
  }
  if (len > 0)
    (void)send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k >= 4)
    return 1;
  close(fd);
  return 0;
}

/* Makes room for `room` entries (closing all with room == STALLS) and closes those older than
 * STALL_MS. An entry is held at least HOLD_MS, longer than PCL_BOOT_EVICT_MS: with the whole pool
 * at one acceptor (the root, during init), more than PCL_BOOT_MAX_PENDING silent connections then
 * wait long enough to be evicted. */
static void pool_trim(stall_t *pool, int *npool, int room) {
  while (*npool > 0 && (*npool > STALLS - room || pcl_mp_now() - pool[0].since > STALL_MS * 1e-3)) {
    double left = pool[0].since + HOLD_MS * 1e-3 - pcl_mp_now();
    if (room < STALLS && left > 0)
      usleep((useconds_t)(left * 1e6) + 1);
    close(pool[0].fd);
    memmove(pool, pool + 1, sizeof(*pool) * (size_t)(--*npool));
  }
}

static int count_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

/* Connects to `to` and counts the outcome; -1 when refused. */
static int junk_open(junk_stats_t *st, const pcl_sockaddr_t *to) {
  int fd = junk_connect(to);
  if (fd < 0)
    st->refused++;
  else
    st->connected++;
  return fd;
}

static void *junk_main(void *arg) {
  junk_stats_t *st = arg;
  stall_t pool[STALLS], lng[LONG_STALLS];
  int npool = 0, nlong = 0, rounds0 = 0;
  pcl_sockaddr_t root;
  memcpy(&root, g_handle.addr, sizeof(root));
  double t0 = pcl_mp_now(), t_up = 0;
  for (int i = 0; i < NJUNK - LONG_STALLS; i++) {
    /* The root until every rank is up (it exits after init), then the ranks' sockets. */
    int up = atomic_load(&g_ranks_up);
    if (up == NRANKS && t_up == 0) {
      t_up = pcl_mp_now();
      rounds0 = atomic_load(&g_iters[0]);
    }
    int fd = junk_open(st, up < NRANKS ? &root : &g_rank_addr[i % NRANKS]);
    atomic_store(&g_junk_sent, i + 1);
    if (i % 250 == 0) {
      int nfds = count_fds();
      st->peak_fds = nfds > st->peak_fds ? nfds : st->peak_fds;
    }
    if (fd < 0 || !junk_one(fd, i % 6))
      continue;
    pool_trim(pool, &npool, 1);
    pool[npool++] = (stall_t){fd, pcl_mp_now()};
  }
  pool_trim(pool, &npool, STALLS);
  /* Last, stalling senders at every rank, held until they outlived PCL_BOOT_GREETING_MS (no flood
   * around any more to evict them first); the ranks keep running meanwhile. */
  for (int i = 0; i < LONG_STALLS; i++) {
    int fd = junk_open(st, &g_rank_addr[i % NRANKS]);
    if (fd >= 0 && junk_one(fd, 4))
      lng[nlong++] = (stall_t){fd, pcl_mp_now()};
  }
  st->seconds = pcl_mp_now() - t0;
  st->rank_phase_s = pcl_mp_now() - t_up;
  st->rank_phase_rounds = atomic_load(&g_iters[0]) - rounds0;
  while (nlong > 0 && pcl_mp_now() - lng[nlong - 1].since < STALL_MS * 1e-3)
    usleep(10000);
  for (int i = 0; i < nlong; i++)
    close(lng[i].fd);
  atomic_store(&g_junk_done, 1);
  return NULL;
}

/* One round of every operation, each result checked. */
static int round_trip(pcl_bootstrap_t *b, int rank, int it) {
  int rc = 0, all[NRANKS][3];
  for (int r = 0; r < NRANKS; r++)
    all[r][0] = all[r][1] = all[r][2] = -1;
  all[rank][0] = rank;
  all[rank][1] = it;
  all[rank][2] = rank * 7919 + it;
  PCL_MP_CHECK(pcl_bootstrap_allgather(b, all, sizeof(all[0])) == ncclSuccess, 10);
  for (int r = 0; r < NRANKS; r++)
    PCL_MP_CHECK(all[r][0] == r && all[r][1] == it && all[r][2] == r * 7919 + it, 11);
  int root = it % NRANKS;
  uint64_t v = rank == root ? 0xabcdef00ull + (uint64_t)it : 0;
  PCL_MP_CHECK(pcl_bootstrap_bcast(b, &v, sizeof(v), root) == ncclSuccess, 12);
  PCL_MP_CHECK(v == 0xabcdef00ull + (uint64_t)it, 13);
  int nxt = (rank + 1) % NRANKS, prv = (rank + NRANKS - 1) % NRANKS, got = -1;
  int mine = rank * 100000 + it;
  PCL_MP_CHECK(pcl_bootstrap_send(b, nxt, it % 3, &mine, sizeof(mine)) == ncclSuccess, 14);
  PCL_MP_CHECK(pcl_bootstrap_recv(b, prv, it % 3, &got, sizeof(got)) == ncclSuccess, 15);
  PCL_MP_CHECK(got == prv * 100000 + it, 16);
  PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 17);
out:
  return rc;
}

static int rank_main(int rank, int n, void *arg) {
  (void)n;
  (void)arg;
  int rc = 0;
  pcl_bootstrap_t *b = NULL;
  /* Stagger the arrivals so init overlaps with the junk at the root. */
  while (atomic_load(&g_junk_sent) < INIT_HEAD + rank * 300)
    usleep(1000);
  double t0 = pcl_mp_now();
  PCL_MP_CHECK(pcl_bootstrap_create(&g_handle, rank, NRANKS, NULL, &b) == ncclSuccess, 1);
  g_t_init[rank] = pcl_mp_now() - t0;
  g_rank_addr[rank] = *pcl_boot_rank_listen_addr(b);
  atomic_fetch_add(&g_ranks_up, 1);
  /* Keep going while the junk comes; every rank decides with the same allgathered flag. */
  for (int it = 0;; it++) {
    PCL_MP_CHECK(round_trip(b, rank, it) == 0, 2);
    atomic_store(&g_iters[rank], it + 1);
    int done[NRANKS] = {0};
    done[rank] = atomic_load(&g_junk_done) && it >= 20;
    PCL_MP_CHECK(pcl_bootstrap_allgather(b, done, sizeof(int)) == ncclSuccess, 3);
    int all_done = 1;
    for (int r = 0; r < NRANKS; r++)
      all_done &= done[r];
    if (all_done)
      break;
  }
  double t1 = pcl_mp_now();
  for (int it = 0; it < CLEAN_ROUNDS; it++)
    PCL_MP_CHECK(round_trip(b, rank, it) == 0, 4);
  if (rank == 0)
    g_t_clean = pcl_mp_now() - t1;
out:
  pcl_bootstrap_destroy(b);
  return rc;
}

/* Lines of the log file containing `what`. */
static int count_lines(const char *path, const char *what) {
  FILE *f = fopen(path, "r");
  char line[2048];
  int n = 0;
  while (f && fgets(line, sizeof(line), f))
    n += strstr(line, what) != NULL;
  if (f)
    fclose(f);
  return n;
}

START_TEST(test_junk_10000) {
  char log_path[] = "/tmp/pcl_junk_log_XXXXXX";
  int lfd = mkstemp(log_path);
  ck_assert_int_ge(lfd, 0);
  close(lfd);
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "60", 1);
  /* INFO for BOOT only: shows the drop summaries too; WARN lines are what PLANCCL_DEBUG=WARN
   * (the default) would print. */
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "BOOT", 1);
  setenv("PLANCCL_DEBUG_FILE", log_path, 1);
  pcl_param_reset();
  pcl_log_reset();
  (void)pcl_log_enabled(PCL_LOG_INFO, PCL_LOG_BOOT); /* opens the log file before fds0 */
  int fds0 = count_fds();
  uint64_t drops0 = pcl_boot_drops_total(PCL_BOOT_DROP_KINDS);
  uint64_t stalled0 = pcl_boot_drops_total(PCL_BOOT_DROP_STALLED);
  uint64_t evicted0 = pcl_boot_drops_total(PCL_BOOT_DROP_EVICTED);
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);

  junk_stats_t js = {0, 0, 0, 0, 0, 0};
  pthread_t junk;
  ck_assert_int_eq(pthread_create(&junk, NULL, junk_main, &js), 0);
  double t0 = pcl_mp_now();
  int codes[NRANKS];
  int rc = pcl_mp_run_threads(NRANKS, rank_main, NULL, codes);
  double t_job = pcl_mp_now() - t0;
  pthread_join(junk, NULL);
  while (pcl_bootstrap_roots_active() > 0)
    usleep(1000);
  uint64_t drops = pcl_boot_drops_total(PCL_BOOT_DROP_KINDS) - drops0;
  uint64_t stalled = pcl_boot_drops_total(PCL_BOOT_DROP_STALLED) - stalled0;
  uint64_t evicted = pcl_boot_drops_total(PCL_BOOT_DROP_EVICTED) - evicted0;
  int warns = count_lines(log_path, "PLANCCL WARN"), lines = count_lines(log_path, "PLANCCL");
  int summaries = count_lines(log_path, "junk connections dropped");
  unlink(log_path);
  printf("junk: %d connections (%d accepted by the kernel, %d refused) in %.2f s (%.0f/s); %llu "
         "dropped by the bootstrap (%llu stalled, %llu evicted)\n",
         NJUNK, js.connected, js.refused, js.seconds, NJUNK / js.seconds, (unsigned long long)drops,
         (unsigned long long)stalled, (unsigned long long)evicted);
  printf("junk: init %.3f/%.3f/%.3f/%.3f s; job %.2f s; rounds of allgather+bcast+p2p+barrier: "
         "%d while junk hit the ranks for %.2f s (%.0f/s), %d after it in %.2f s (%.0f/s)\n",
         g_t_init[0], g_t_init[1], g_t_init[2], g_t_init[3], t_job, js.rank_phase_rounds,
         js.rank_phase_s, js.rank_phase_rounds / js.rank_phase_s, CLEAN_ROUNDS, g_t_clean,
         CLEAN_ROUNDS / g_t_clean);
  printf("junk: log %d lines (%d WARN, %d drop summaries at INFO); fds %d before, at most %d "
         "during (%d of them the junk's own), %d after\n",
         lines, warns, summaries, fds0, js.peak_fds, STALLS, count_fds());
  fflush(stdout);
  ck_assert_msg(rc == 0, "rank failed with %d", rc);
  ck_assert_int_gt(js.connected, NJUNK / 2);
  ck_assert_uint_ge(drops, (uint64_t)js.connected / 2);
  ck_assert_uint_ge(stalled, LONG_STALLS); /* the greeting deadline works */
  ck_assert_uint_gt(evicted, 0);           /* and so does the pending bound */
  /* Per acceptor (the root and each rank) at most PCL_BOOT_DROP_WARNS WARN lines. */
  ck_assert_int_le(warns, PCL_BOOT_DROP_WARNS * (NRANKS + 1));
  ck_assert_int_ge(summaries, 1);
  ck_assert_int_le(lines, 200);
  ck_assert_int_eq(count_fds(), fds0);
  /* Bounded by the junk's own pool, PCL_BOOT_MAX_PENDING per acceptor and the job's sockets. */
  ck_assert_int_le(js.peak_fds, fds0 + STALLS + (NRANKS + 1) * PCL_BOOT_MAX_PENDING + 64);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("bootstrap_junk");
  TCase *tc = tcase_create("test_junk_10000");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_junk_10000);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
