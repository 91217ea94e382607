/* SPDX-License-Identifier: MIT
 * GPU-memory error paths on a machine without a GPU (or without a driver): every call returns a
 * clean error, nothing crashes, nothing leaks, and a collective memory-channel setup fails on
 * every rank instead of leaving one waiting. On a GPU machine the GPU-absent cases are skipped. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "bootstrap.h"
#include "mem.h"
#include "memchan.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_test.h"

static int have_gpu(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n > 0;
}

START_TEST(test_alloc_args) {
  pcl_mem_alloc_t *a = (pcl_mem_alloc_t *)0x1;
  ck_assert_int_eq(pcl_mem_alloc(-1, 4096, PCL_MEM_ALLOC_AUTO, &a), ncclInvalidArgument);
  ck_assert_int_eq(pcl_mem_alloc(0, 0, PCL_MEM_ALLOC_AUTO, &a), ncclInvalidArgument);
  ck_assert_int_eq(pcl_mem_alloc(0, 4096, (pcl_mem_alloc_kind_t)7, &a), ncclInvalidArgument);
  ck_assert_int_eq(pcl_mem_alloc(0, 4096, PCL_MEM_ALLOC_CUDA, NULL), ncclInvalidArgument);
  ck_assert_ptr_eq(a, (pcl_mem_alloc_t *)0x1); /* untouched on failure */
  pcl_mem_free(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_alloc_without_gpu) {
  if (have_gpu())
    return;
  for (int k = PCL_MEM_ALLOC_AUTO; k <= PCL_MEM_ALLOC_CUMEM; k++) {
    pcl_mem_alloc_t *a = NULL;
    ncclResult_t r = pcl_mem_alloc(0, 1 << 20, (pcl_mem_alloc_kind_t)k, &a);
    ck_assert_msg(r != ncclSuccess, "kind %d allocated without a GPU", k);
    ck_assert_ptr_null(a);
  }
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_reg_errors) {
  pcl_mem_reg_t *reg = NULL;
  ck_assert_int_eq(pcl_mem_reg(NULL, 16, &reg), ncclInvalidArgument);
  char host[64];
  ck_assert_int_eq(pcl_mem_reg(host, 0, &reg), ncclInvalidArgument);
  /* Host memory: "not device memory" with a driver, "no driver" without one; never success. */
  ck_assert_int_ne(pcl_mem_reg(host, sizeof(host), &reg), ncclSuccess);
  ck_assert_ptr_null(reg);
  pcl_mem_dereg(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_import_errors) {
  pcl_mem_desc_t d;
  pcl_mem_import_t *imp = NULL;
  memset(&d, 0, sizeof(d));
  ck_assert_int_eq(pcl_mem_import(&d, 0, &imp), ncclInvalidArgument);
  ck_assert_int_eq(pcl_mem_import(NULL, 0, &imp), ncclInvalidArgument);
  d.magic = PCL_MEM_DESC_MAGIC;
  d.version = PCL_MEM_DESC_VERSION;
  d.kind = PCL_MEM_KIND_CUDA_IPC;
  d.proc_token = 12345; /* "another process" */
  d.base = 1u << 30;
  d.span = 1u << 20;
  d.bytes = 4096;
  d.ipc[0] = 1;
  ck_assert_int_eq(pcl_mem_import(&d, -1, &imp), ncclInvalidArgument);
  ck_assert_int_eq(pcl_mem_import(&d, 0, NULL), ncclInvalidArgument);
  if (!have_gpu()) {
    ck_assert_int_ne(pcl_mem_import(&d, 0, &imp), ncclSuccess);
    d.kind = PCL_MEM_KIND_CUMEM_FD;
    d.flags = PCL_MEM_FLAG_VMM;
    memset(d.ipc, 0, sizeof(d.ipc));
    d.nchunks = 1;
    d.fd_server = 1;
    d.fd_secret = 2;
    ck_assert_int_ne(pcl_mem_import(&d, 0, &imp), ncclSuccess);
  }
  ck_assert_ptr_null(imp);
  pcl_mem_import_close(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_memchan_args) {
  pcl_memchan_t *mc = NULL;
  pcl_memchan_config_t cfg = {.cuda_dev = 0, .nchannels = 0};
  pcl_bootstrap_t *fake = (pcl_bootstrap_t *)&cfg; /* never dereferenced: arguments fail first */
  ck_assert_int_eq(pcl_memchan_create(fake, &cfg, &mc), ncclInvalidArgument);
  cfg.nchannels = PCL_MEMCHAN_MAX_CHANNELS + 1;
  ck_assert_int_eq(pcl_memchan_create(fake, &cfg, &mc), ncclInvalidArgument);
  cfg.nchannels = 1;
  cfg.scratch_bytes = 64; /* with a NULL scratch */
  ck_assert_int_eq(pcl_memchan_create(fake, &cfg, &mc), ncclInvalidArgument);
  cfg.scratch_bytes = 0;
  ck_assert_int_eq(pcl_memchan_create(NULL, &cfg, &mc), ncclInvalidArgument);
  ck_assert_int_eq(pcl_memchan_create(fake, NULL, &mc), ncclInvalidArgument);
  ck_assert_ptr_null(mc);
  pcl_memchan_info_t info;
  ck_assert_int_eq(pcl_memchan_info(NULL, 1, 0, &info), ncclInvalidArgument);
  ck_assert_int_eq(pcl_memchan_connected(NULL, 1), 0);
  ck_assert_uint_eq(pcl_memchan_buf_remote(NULL, 1, NULL), 0);
  pcl_memchan_destroy(NULL);
  pcl_memchan_buf_release(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static pcl_bootstrap_handle_t g_handle;

/* Each rank: create must fail (no GPU) on every rank, promptly, with nothing left allocated. */
static int rank_create_fails(int rank, int n, void *arg) {
  pcl_bootstrap_t *b = NULL;
  pcl_memchan_t *mc = NULL;
  if (pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) != ncclSuccess)
    return 10;
  pcl_memchan_config_t cfg = {.cuda_dev = rank, .nchannels = 4};
  int64_t before = pcl_alloc_outstanding();
  ncclResult_t r = pcl_memchan_create(b, &cfg, &mc);
  int64_t after = pcl_alloc_outstanding(); /* the bootstrap's own allocations are not ours */
  /* The bootstrap still works afterwards: nobody is stuck in the middle of the exchange. */
  ncclResult_t rb = pcl_bootstrap_barrier(b);
  pcl_bootstrap_destroy(b);
  if (r == ncclSuccess || mc != NULL)
    return 11;
  if (rb != ncclSuccess)
    return 12;
  if (after != before)
    return 13;
  return 0;
}

START_TEST(test_memchan_create_fails_everywhere) {
  if (have_gpu())
    return;
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "30", 1);
  pcl_param_reset();
  for (int n = 2; n <= 3; n++) {
    ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
    int codes[3] = {0};
    int rc = pcl_mp_run(n, rank_create_fails, NULL, 60, codes);
    ck_assert_msg(rc == 0, "%d ranks: codes %d %d %d", n, codes[0], codes[1], codes[2]);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpumem_nogpu");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_alloc_args);
  tcase_add_test(tc, test_alloc_without_gpu);
  tcase_add_test(tc, test_reg_errors);
  tcase_add_test(tc, test_import_errors);
  tcase_add_test(tc, test_memchan_args);
  /* Forked ranks from a process whose bootstrap root runs: left out of the AddressSanitizer run,
   * whose runtime can deadlock such a child (test_gpumem_nogpu_nofork). */
  TCase *fk = tcase_create("fork");
  tcase_set_tags(fk, "fork");
  tcase_set_timeout(fk, 120);
  tcase_add_test(fk, test_memchan_create_fails_everywhere);
  suite_add_tcase(s, tc);
  suite_add_tcase(s, fk);
  return pcl_test_run_suite(s);
}
