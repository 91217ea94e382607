/* SPDX-License-Identifier: MIT
 * Port channels end to end without a GPU: two ranks, each with a proxy fed by a CPU producer,
 * move data and flags over TCP (threads on loopback, and processes in two network namespaces
 * with different PLANCCL_HOST_IDs) and over InfiniBand where an HCA exists; plus topology. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "log.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_test.h"
#include "proxy.h"
#include "topo.h"

#include "port_check.h"
#include "port_stripes.h"

/* The bootstrap roots of the runs have exited, and nothing they or the ranks made is left. */
static void roots_gone_no_leaks(void) {
  for (int i = 0; i < 500 && pcl_bootstrap_roots_active() > 0; i++)
    usleep(10000);
  PCL_ASSERT_NO_LEAKS();
}

START_TEST(test_tcp_threads) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  static port_args_t a;
  a.kind = PCL_TRANSPORT_NONE; /* no GPU, no HCA assumed: */
  a.expect = pcl_ib_device_count() > 0 ? PCL_TRANSPORT_IB : PCL_TRANSPORT_TCP;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, port_rank, &a, NULL), 0);
  a.kind = a.expect = PCL_TRANSPORT_TCP;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, port_rank, &a, NULL), 0);
  roots_gone_no_leaks();
}
END_TEST

/* Large puts striped over 3 and 8 streams (and 1: no striping) land in issue order. */
START_TEST(test_tcp_stripes) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  static const char *streams[] = {"3", "8", "1"};
  static stripes_args_t a;
  for (int i = 0; i < 3; i++) {
    setenv("PLANCCL_TCP_STREAMS", streams[i], 1);
    pcl_param_reset();
    ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
    ck_assert_msg(pcl_mp_run_threads(2, stripes_rank, &a, NULL) == 0, "%s streams", streams[i]);
  }
  unsetenv("PLANCCL_TCP_STREAMS");
  pcl_param_reset();
  roots_gone_no_leaks();
}
END_TEST

/* Rank 1 withdraws its destination region; rank 0 then puts into it. Rank 1's receiver must
 * stop and its proxy report the failure (before, the receiver stopped silently and whoever
 * waited for the data found out only by a timeout, or never with PLANCCL_TIMEOUT_S=0). */
/* Two ranks over TCP with a started proxy each (port_pair_open): `bytes` of source (filled with
 * a pattern) and destination, a semaphore; rank 1 may withdraw its destination (`withdraw`),
 * which makes its receiver fail on the first put into it. */
typedef struct {
  pcl_bootstrap_t *b;
  pcl_proxy_t *px;
  unsigned char *src, *dst;
  uint64_t *sem;
} pair_t;

static int pair_up(stripes_args_t *a, int rank, int n, size_t bytes, int withdraw, pair_t *p) {
  memset(p, 0, sizeof(*p));
  p->src = malloc(bytes);
  p->dst = calloc(1, bytes);
  p->sem = aligned_alloc(64, 64);
  if (p->src == NULL || p->dst == NULL || p->sem == NULL)
    return 1;
  memset(p->sem, 0, 64);
  for (size_t i = 0; i < bytes; i++)
    p->src[i] = (unsigned char)(i * 7 + 3);
  if (pcl_bootstrap_create(&a->handle, rank, n, NULL, &p->b) != ncclSuccess)
    return 2;
  if (port_pair_open(p->b, rank, n, PCL_TRANSPORT_TCP, p->src, p->dst, bytes, p->sem, &p->px) != 0)
    return 3;
  if (withdraw && rank == 1 && pcl_proxy_mem_dereg(p->px, 1) != ncclSuccess)
    return 4;
  return pcl_bootstrap_barrier(p->b) == ncclSuccess ? 0 : 5;
}

/* Both ranks meet, then each tears its side down. */
static void pair_down(pair_t *p) {
  if (p->b != NULL)
    (void)pcl_bootstrap_barrier(p->b);
  pcl_proxy_destroy(p->px);
  pcl_bootstrap_destroy(p->b);
  free(p->src);
  free(p->dst);
  free(p->sem);
}

static int rx_failure_rank(int rank, int n, void *argp) {
  int rc = 0;
  pair_t p;
  PCL_MP_CHECK(pair_up(argp, rank, n, 4096, 1, &p) == 0, 1);
  if (rank == 0) {
    pcl_fifo_device_t f = pcl_proxy_fifo(p.px);
    uint64_t pos =
        pcl_fifo_host_push(f, pcl_fifo_w0(64, 0),
                           pcl_fifo_w1(PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_SYNC, 0, 1, 0, 0), NULL);
    PCL_MP_CHECK(pos != UINT64_MAX && pcl_fifo_host_wait(f, pos, NULL) == 0, 6);
    PCL_MP_CHECK(pcl_proxy_error(p.px) == ncclSuccess, 7); /* the sender did nothing wrong */
  } else {
    double end = pcl_mp_now() + 10;
    while (pcl_proxy_error(p.px) == ncclSuccess && pcl_mp_now() < end)
      usleep(1000);
    PCL_MP_CHECK(pcl_proxy_error(p.px) == ncclRemoteError, 8);
  }
out:
  pair_down(&p);
  return rc;
}

START_TEST(test_tcp_rx_failure) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  static stripes_args_t a;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, rx_failure_rank, &a, NULL), 0);
  roots_gone_no_leaks();
}
END_TEST

/* Rank 0 posts puts and a final signal, then destroys its proxy at once, as a communicator's
 * last call does when its kernel has only posted them: the destroy must carry them out, else
 * rank 1, still waiting for the signal, waits forever (seen with a multi-node communicator
 * through the NCCL API, test/gpu/shim_multinode). */
#define DRAIN_PUTS 48
static int drain_rank(int rank, int n, void *argp) {
  int rc = 0;
  pair_t p;
  PCL_MP_CHECK(pair_up(argp, rank, n, 4096, 0, &p) == 0, 1);
  if (rank == 0) {
    pcl_fifo_device_t f = pcl_proxy_fifo(p.px);
    usleep(300000); /* the proxy thread is in its idle naps by now */
    for (int i = 0; i < DRAIN_PUTS; i++) {
      uint32_t type = PCL_FIFO_TYPE_DATA | (i == DRAIN_PUTS - 1 ? PCL_FIFO_TYPE_FLAG : 0);
      uint64_t off = (uint64_t)(i % 4) * 1024;
      PCL_MP_CHECK(pcl_fifo_host_push(f, pcl_fifo_w0(1024, off), pcl_fifo_w1(type, 0, 1, off, 0),
                                      NULL) != UINT64_MAX,
                   5);
    }
    pcl_proxy_destroy(p.px); /* nothing waited for: destroy alone must deliver them */
    p.px = NULL;
  } else {
    double end = pcl_mp_now() + 10;
    while (atomic_load_explicit((_Atomic uint64_t *)&p.sem[0], memory_order_acquire) < 1 &&
           pcl_mp_now() < end)
      usleep(1000);
    PCL_MP_CHECK(atomic_load_explicit((_Atomic uint64_t *)&p.sem[0], memory_order_acquire) == 1, 6);
    PCL_MP_CHECK(memcmp(p.src, p.dst, 4096) == 0, 7);
    /* Rank 0's connection closes after its goodbye: an orderly end, not a failure. */
    usleep(300000);
    PCL_MP_CHECK(pcl_proxy_error(p.px) == ncclSuccess, 8);
  }
out:
  pair_down(&p);
  return rc;
}

START_TEST(test_tcp_destroy_drains) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  static stripes_args_t a;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, drain_rank, &a, NULL), 0);
  roots_gone_no_leaks();
}
END_TEST

/* Aborted first, destroy drops what is posted and returns at once, though the peer stopped
 * reading (its receiver failed on a withdrawn region): without the abort the stalled send would
 * end only by PLANCCL_BOOTSTRAP_TIMEOUT_S (30 s here). */
static int abort_rank(int rank, int n, void *argp) {
  int rc = 0;
  pair_t p;
  const size_t bytes = 8u << 20; /* far more than the sockets buffer */
  PCL_MP_CHECK(pair_up(argp, rank, n, bytes, 1, &p) == 0, 1);
  if (rank == 0) {
    pcl_fifo_device_t f = pcl_proxy_fifo(p.px);
    for (int i = 0; i < 16; i++)
      PCL_MP_CHECK(pcl_fifo_host_push(f, pcl_fifo_w0(bytes, 0),
                                      pcl_fifo_w1(PCL_FIFO_TYPE_DATA, 0, 1, 0, 0),
                                      NULL) != UINT64_MAX,
                   6);
    usleep(200000); /* the proxy is inside a send the peer no longer reads */
    double t0 = pcl_mp_now();
    pcl_proxy_abort(p.px);
    pcl_proxy_destroy(p.px);
    p.px = NULL;
    PCL_MP_CHECK(pcl_mp_now() - t0 < 5.0, 7);
  }
out:
  pair_down(&p);
  return rc;
}

START_TEST(test_tcp_abort_no_drain) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "30", 1);
  pcl_param_reset();
  static stripes_args_t a;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, abort_rank, &a, NULL), 0);
  roots_gone_no_leaks();
}
END_TEST

/* Rank 1's process ends without tearing anything down (a crash, a kill): its sockets close
 * without a goodbye, and rank 0's proxy must report it (ncclRemoteError) rather than leave a
 * kernel waiting for data that never comes. Forked ranks: the exit must be a process's. */
/* The owner's failure callback: how often it ran, and with what. */
static _Atomic int g_fail_calls, g_fail_res;
static void on_fail(void *arg, ncclResult_t res) {
  (void)arg;
  atomic_fetch_add(&g_fail_calls, 1);
  atomic_store(&g_fail_res, (int)res);
}

static int peer_dies_rank(int rank, int n, void *argp) {
  int rc = 0;
  pair_t p;
  PCL_MP_CHECK(pair_up(argp, rank, n, 4096, 0, &p) == 0, 1);
  if (rank == 1)
    _exit(0);
  pcl_proxy_on_fail(p.px, on_fail, NULL);
  double end = pcl_mp_now() + 10;
  while (pcl_proxy_error(p.px) == ncclSuccess && pcl_mp_now() < end)
    usleep(1000);
  PCL_MP_CHECK(pcl_proxy_error(p.px) == ncclRemoteError, 2);
  /* Told once (every stream saw the end; only the first failure counts). */
  usleep(100000);
  PCL_MP_CHECK(atomic_load(&g_fail_calls) == 1 && atomic_load(&g_fail_res) == ncclRemoteError, 3);
  pcl_proxy_on_fail(p.px, NULL, NULL);
out:
  pcl_proxy_destroy(p.px);
  pcl_bootstrap_destroy(p.b); /* no barrier: the peer is gone */
  p.px = NULL;
  p.b = NULL;
  pair_down(&p);
  return rc;
}

START_TEST(test_tcp_peer_dies) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  static stripes_args_t a;
  int codes[2] = {0, 0};
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_msg(pcl_mp_run(2, peer_dies_rank, &a, 60, codes) == 0, "rank codes %d %d", codes[0],
                codes[1]);
  roots_gone_no_leaks();
}
END_TEST

START_TEST(test_ib_loopback) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  static port_args_t a;
  a.kind = a.expect = PCL_TRANSPORT_IB;
  ck_assert_int_eq(pcl_bootstrap_root_create(&a.handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run_threads(2, port_rank, &a, NULL), 0);
}
END_TEST

/* ---- topology: 4 forked ranks pretending to be 2 hosts ---- */

static pcl_bootstrap_handle_t g_handle;
static int topo_rank(int rank, int n, void *arg) {
  int rc = 0;
  pcl_bootstrap_t *b = NULL;
  pcl_topo_t *t = NULL;
  char id[16];
  snprintf(id, sizeof(id), "host%d", rank / 2);
  setenv("PLANCCL_HOST_ID", id, 1);
  pcl_param_reset();
  PCL_MP_CHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 1);
  PCL_MP_CHECK(pcl_topo_create(b, -1, &t) == ncclSuccess, 2);
  PCL_MP_CHECK(pcl_topo_nnodes(t) == 2, 3);
  PCL_MP_CHECK(pcl_topo_ranks_per_node(t) == 2, 4);
  PCL_MP_CHECK(pcl_topo_local_rank(t, rank) == rank % 2, 5);
  PCL_MP_CHECK(pcl_topo_node(t, rank) == rank / 2, 6);
  PCL_MP_CHECK(pcl_topo_same_host(t, 0, 1) && !pcl_topo_same_host(t, 1, 2), 7);
  PCL_MP_CHECK(!pcl_topo_same_process(t, 0, 1) && pcl_topo_same_process(t, rank, rank), 8);
  for (int r = 0; r < n; r++)
    PCL_MP_CHECK(!pcl_topo_peer_access(t, rank, r), 9);
  PCL_MP_CHECK(pcl_topo_rank_info(t, rank)->cuda_dev == -1, 10);
  PCL_MP_CHECK(pcl_topo_rank_info(t, 3)->pid != 0, 11);
out:
  pcl_topo_destroy(t);
  pcl_bootstrap_destroy(b);
  return rc;
}

START_TEST(test_topo_two_hosts) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run(4, topo_rank, NULL, 60, NULL), 0);
}
END_TEST

START_TEST(test_topo_threads_same_process) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("PLANCCL_HOST_ID");
  pcl_param_reset();
  pcl_bootstrap_handle_t h;
  ck_assert_int_eq(pcl_bootstrap_root_create(&h), ncclSuccess);
  /* one rank: the whole picture is itself */
  pcl_bootstrap_t *b = NULL;
  pcl_topo_t *t = NULL;
  ck_assert_int_eq(pcl_bootstrap_create(&h, 0, 1, NULL, &b), ncclSuccess);
  ck_assert_int_eq(pcl_topo_create(b, -1, &t), ncclSuccess);
  ck_assert_int_eq(pcl_topo_nnodes(t), 1);
  ck_assert_int_eq(pcl_topo_ranks_per_node(t), 1);
  ck_assert(pcl_topo_same_process(t, 0, 0));
  ck_assert_int_eq(pcl_topo_node(t, 5), -1);
  unsigned char mask[128];
  ck_assert_int_eq(pcl_topo_pci_local_cpus("0000:ff:ff.7", mask, sizeof(mask)), 0);
  pcl_topo_destroy(t);
  pcl_bootstrap_destroy(b);
  roots_gone_no_leaks();
}
END_TEST

#ifdef PCL_TEST_IB_ONLY
/* test_ib: the IB loopback alone, skipped (77) where no HCA or soft-RoCE device exists. */
int main(void) {
  if (pcl_ib_device_count() == 0) {
    fprintf(stderr, "no usable InfiniBand/RoCE device: skipped\n");
    return 77;
  }
  Suite *s = suite_create("ib");
  TCase *tc = tcase_create("ib");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_ib_loopback);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
#else
int main(void) {
  Suite *s = suite_create("port");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_topo_threads_same_process);
  tcase_add_test(tc, test_tcp_threads);
  if (pcl_ib_device_count() > 0)
    tcase_add_test(tc, test_ib_loopback);
  suite_add_tcase(s, tc);
  TCase *st = tcase_create("stripes");
  tcase_set_timeout(st, 120);
  tcase_add_test(st, test_tcp_stripes);
  tcase_add_test(st, test_tcp_rx_failure);
  tcase_add_test(st, test_tcp_destroy_drains);
  tcase_add_test(st, test_tcp_abort_no_drain);
  suite_add_tcase(s, st);
  /* Forked ranks (posing as hosts; one that dies) from a process whose bootstrap root runs:
   * outside both sanitizer runs, whose runtimes can deadlock such a child (test_port_nofork
   * runs the rest under AddressSanitizer, test_port_stripes the striping under TSan). */
  TCase *fk = tcase_create("fork");
  tcase_set_tags(fk, "fork");
  tcase_set_timeout(fk, 120);
  tcase_add_test(fk, test_topo_two_hosts);
  tcase_add_test(fk, test_tcp_peer_dies);
  suite_add_tcase(s, fk);
  return pcl_test_run_suite(s);
}
#endif
