/* SPDX-License-Identifier: MIT
 * ncclCommSuspend / ncclCommResume against the fake: between a successful suspend and resume
 * every collective, one-sided call and registration on the communicator is refused with
 * ncclInvalidUsage (one WARN per communicator) before reaching the real NCCL; the mark follows
 * the real NCCL's answers, so a failed suspend or resume changes nothing. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_compat_int.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)
#define CFG ((const pcl_coll_config_t *)(uintptr_t)0xc0f1)

/* Every call that a suspended communicator refuses, once each; returns how many did not return
 * `want`. */
static int calls_on(ncclComm_t comm, ncclResult_t want) {
  int bad = 0;
  ncclWindow_t win = (ncclWindow_t)(uintptr_t)0x3180;
  void *h = NULL;
  pcl_wait_signal_desc_t *descs = (pcl_wait_signal_desc_t *)(uintptr_t)0x5160;
  /* In this order: the first is the call the WARN names. */
  bad += ncclAllReduce(SBUF, RBUF, 64, ncclFloat, ncclSum, comm, STREAM) != want;
  bad += ncclAllReduceConfig(SBUF, RBUF, 64, ncclFloat, ncclSum, comm, STREAM, NULL) != want;
  bad += ncclAllReduceConfig(SBUF, RBUF, 64, ncclFloat, ncclSum, comm, STREAM, CFG) != want;
  bad += ncclBroadcast(SBUF, RBUF, 64, ncclFloat, 0, comm, STREAM) != want;
  bad += ncclBcast(RBUF, 64, ncclFloat, 0, comm, STREAM) != want;
  bad += ncclReduce(SBUF, RBUF, 64, ncclFloat, ncclSum, 0, comm, STREAM) != want;
  bad += ncclAllGather(SBUF, RBUF, 64, ncclFloat, comm, STREAM) != want;
  bad += ncclReduceScatterConfig(SBUF, RBUF, 64, ncclFloat, ncclSum, comm, STREAM, CFG) != want;
  bad += ncclAlltoAll(SBUF, RBUF, 64, ncclFloat, comm, STREAM) != want;
  bad += ncclGatherConfig(SBUF, RBUF, 64, ncclFloat, 0, comm, STREAM, NULL) != want;
  bad += ncclScatter(SBUF, RBUF, 64, ncclFloat, 0, comm, STREAM) != want;
  bad += ncclSend(SBUF, 64, ncclFloat, 0, comm, STREAM) != want;
  bad += ncclRecv(RBUF, 64, ncclFloat, 0, comm, STREAM) != want;
  bad += ncclPutSignal(SBUF, 1, ncclFloat, 0, win, 0, 0, 0, 0, comm, STREAM) != want;
  bad += ncclSignal(0, 0, 0, 0, comm, STREAM) != want;
  bad += ncclWaitSignal(1, descs, comm, STREAM) != want;
  bad += ncclCommRegister(comm, RBUF, 4096, &h) != want;
  bad += ncclCommWindowRegister(comm, RBUF, 4096, &win, 0) != want;
  return bad;
}

START_TEST(test_suspended_comm_refuses_calls) {
  char log[512];
  char *dir = shim_test_log_dir(log, sizeof(log));
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real, *real2;
  ncclComm_t comm = shim_test_make_comm(st, 2, 1, &real);
  ncclComm_t other = shim_test_make_comm(st, 2, 1, &real2);
  ck_assert_int_eq(calls_on(comm, ncclSuccess), 0);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclSuccess);
  ck_assert_int_ge(shim_test_last(st, "ncclCommSuspend"), 0);
  int before = st->ncalls;
  ck_assert_int_eq(calls_on(comm, ncclInvalidUsage), 0);
  ck_assert_int_eq(calls_on(comm, ncclInvalidUsage), 0);
  ck_assert_int_eq(st->ncalls, before); /* nothing reached the real NCCL */
  /* One WARN for the communicator, naming the first refused call. */
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "is suspended"), 1);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "ncclAllReduce: communicator"), 1);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "suspended"));
  /* Another communicator is not affected. */
  ck_assert_int_eq(calls_on(other, ncclSuccess), 0);
  /* Deregistration only releases: forwarded (the real NCCL judges). */
  ck_assert_int_eq(ncclCommDeregister(comm, (void *)(uintptr_t)0x4a5d), ncclSuccess);
  ck_assert_int_ge(shim_test_last(st, "ncclCommDeregister"), 0);
  /* Suspending again: the real NCCL's answer, and the communicator stays suspended. */
  shim_test_set_result(st, "ncclCommSuspend", ncclInvalidUsage);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclInvalidUsage);
  ck_assert_int_eq(calls_on(comm, ncclInvalidUsage), 0);
  /* A failing resume leaves it suspended. */
  shim_test_set_result(st, "ncclCommResume", ncclSystemError);
  ck_assert_int_eq(ncclCommResume(comm), ncclSystemError);
  ck_assert_int_eq(calls_on(comm, ncclInvalidUsage), 0);
  /* A resume that succeeds: everything works again. */
  shim_test_set_result(st, "ncclCommResume", ncclSuccess);
  ck_assert_int_eq(ncclCommResume(comm), ncclSuccess);
  ck_assert_int_eq(shim_test_last(st, "ncclCommResume") >= 0, 1);
  ck_assert_int_eq(calls_on(comm, ncclSuccess), 0);
  /* Resume of a running communicator: the real NCCL's answer; it keeps running. */
  shim_test_set_result(st, "ncclCommResume", ncclInvalidUsage);
  ck_assert_int_eq(ncclCommResume(comm), ncclInvalidUsage);
  ck_assert_int_eq(calls_on(comm, ncclSuccess), 0);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "is suspended"), 1);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(other), ncclSuccess);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* A real suspend that fails leaves the communicator usable; one in progress (non-blocking)
 * already counts as suspended. */
START_TEST(test_failed_suspend_leaves_comm_usable) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  shim_test_set_result(st, "ncclCommSuspend", ncclSystemError);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclSystemError);
  ck_assert_int_eq(calls_on(comm, ncclSuccess), 0);
  shim_test_set_result(st, "ncclCommSuspend", ncclInProgress);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclInProgress);
  ck_assert_int_eq(calls_on(comm, ncclInvalidUsage), 0);
  ck_assert_int_eq(ncclCommResume(comm), ncclSuccess);
  ck_assert_int_eq(calls_on(comm, ncclSuccess), 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

TCase *shim_tcase_suspend(void) {
  TCase *tc = tcase_create("suspend");
  tcase_add_test(tc, test_suspended_comm_refuses_calls);
  tcase_add_test(tc, test_failed_suspend_leaves_comm_usable);
  return tc;
}
