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
static int rx_failure_rank(int rank, int n, void *argp) {
  stripes_args_t *a = argp;
  int rc = 0;
  pcl_bootstrap_t *b = NULL;
  pcl_proxy_t *px = NULL;
  unsigned char *src = calloc(1, 4096), *dst = calloc(1, 4096);
  uint64_t *sem = aligned_alloc(64, 64);
  PCL_MP_CHECK(src && dst && sem, 1);
  memset(sem, 0, 64);
  PCL_MP_CHECK(pcl_bootstrap_create(&a->handle, rank, n, NULL, &b) == ncclSuccess, 2);
  PCL_MP_CHECK(port_pair_open(b, rank, n, PCL_TRANSPORT_TCP, src, dst, 4096, sem, &px) == 0, 3);
  if (rank == 1)
    PCL_MP_CHECK(pcl_proxy_mem_dereg(px, 1) == ncclSuccess, 4);
  PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 5);
  if (rank == 0) {
    pcl_fifo_device_t f = pcl_proxy_fifo(px);
    uint64_t pos =
        pcl_fifo_host_push(f, pcl_fifo_w0(64, 0),
                           pcl_fifo_w1(PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_SYNC, 0, 1, 0, 0), NULL);
    PCL_MP_CHECK(pos != UINT64_MAX && pcl_fifo_host_wait(f, pos, NULL) == 0, 6);
    PCL_MP_CHECK(pcl_proxy_error(px) == ncclSuccess, 7); /* the sender did nothing wrong */
  } else {
    double end = pcl_mp_now() + 10;
    while (pcl_proxy_error(px) == ncclSuccess && pcl_mp_now() < end)
      usleep(1000);
    PCL_MP_CHECK(pcl_proxy_error(px) == ncclRemoteError, 8);
  }
out:
  if (b != NULL)
    (void)pcl_bootstrap_barrier(b);
  pcl_proxy_destroy(px);
  pcl_bootstrap_destroy(b);
  free(src);
  free(dst);
  free(sem);
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
  tcase_add_test(tc, test_topo_two_hosts);
  tcase_add_test(tc, test_tcp_threads);
  if (pcl_ib_device_count() > 0)
    tcase_add_test(tc, test_ib_loopback);
  suite_add_tcase(s, tc);
  TCase *st = tcase_create("stripes");
  tcase_set_timeout(st, 120);
  tcase_add_test(st, test_tcp_stripes);
  tcase_add_test(st, test_tcp_rx_failure);
  suite_add_tcase(s, st);
  return pcl_test_run_suite(s);
}
#endif
