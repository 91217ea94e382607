/* SPDX-License-Identifier: MIT
 * Shared host memory of a communicator (transport/shm.c) between forked ranks on loopback: every
 * rank sees the others' writes, the fd entry is withdrawn once the setup is over, and nothing
 * leaks. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>
#include "bootstrap.h"
#include "mem_int.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_test.h"
#include "shm.h"

static pcl_bootstrap_handle_t g_handle;

static int rank_shm(int rank, int n, void *arg) {
  int rc = 0;
  const int64_t outstanding0 = pcl_alloc_outstanding(); /* a forked child inherits the parent's */
  pcl_bootstrap_t *b = NULL;
  pcl_shm_t *shm = NULL;
  (void)arg;
  PCL_MP_CHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 1);
  PCL_MP_CHECK(pcl_shm_create(b, 3 * 4096, &shm) == ncclSuccess && shm != NULL, 2);
  /* The fd is handed out during the setup only. */
  PCL_MP_CHECK(pcl_ipc_fd_server_entries() == 0, 3);
  volatile uint64_t *w = pcl_shm_ptr(shm);
  for (int i = 0; i < 3 * 4096 / 8; i++) /* zero-filled */
    PCL_MP_CHECK(w[i] == 0, 4);
  PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 4);
  w[rank * 64] = 1000u + (uint64_t)rank;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 5);
  for (int r = 0; r < n; r++)
    PCL_MP_CHECK(w[r * 64] == 1000u + (uint64_t)r, 6);
  PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 7);
out:
  pcl_shm_destroy(shm);
  pcl_bootstrap_destroy(b);
  if (rc == 0 && pcl_alloc_outstanding() != outstanding0)
    rc = 20;
  return rc;
}

START_TEST(test_shm_5) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  (void)pcl_param_socket_ifname(); /* resolved before forking: no lock held in a child */
  (void)pcl_param_bootstrap_timeout_s();
  (void)pcl_param_host_id();
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  int codes[5];
  ck_assert_int_eq(pcl_mp_run(5, rank_shm, NULL, 60, codes), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("shm");
  TCase *tc = tcase_create("shm");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_shm_5);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
