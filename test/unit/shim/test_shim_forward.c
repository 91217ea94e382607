/* SPDX-License-Identifier: MIT
 * Forwarding against the recording fake NCCL: every function reaches the fake with exactly the
 * caller's arguments (planccl's comm replaced by the real one), its return code comes back, the
 * fake's calls to its own public names stay inside it (RTLD_DEEPBIND), and bad arguments are
 * refused before anything is forwarded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_compat_int.h"
#include "nccl_device_int.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)

/* Asserts that the last call `name` got exactly args[0..n). */
static void expect_call(struct fake_state *st, const char *name, int n, const uint64_t *args) {
  int i = shim_test_last(st, name);
  ck_assert_msg(i >= 0, "%s was not forwarded", name);
  for (int k = 0; k < n; k++)
    ck_assert_msg(st->calls[i].a[k] == args[k], "%s argument %d: got 0x%llx, want 0x%llx", name, k,
                  (unsigned long long)st->calls[i].a[k], (unsigned long long)args[k]);
}
#define EXPECT(st, name, ...)                                                                      \
  do {                                                                                             \
    uint64_t want_[] = {__VA_ARGS__};                                                              \
    expect_call(st, name, (int)(sizeof(want_) / sizeof(want_[0])), want_);                         \
  } while (0)

/* A failed init is said at WARN with the real library's words: NCCL alone prints nothing. */
START_TEST(test_init_failure_warned) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  shim_test_set_result(st, "ncclCommInitRank", ncclSystemError);
  snprintf(st->last_error, sizeof(st->last_error), "fake: cudaSetDevice failed");
  ncclComm_t comm = (ncclComm_t)0x1;
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 0), ncclSystemError);
  ck_assert_ptr_null(comm);
  const char *e = ncclGetLastError(NULL);
  ck_assert_msg(strstr(e, "communicator init failed in the real NCCL: unhandled system error") &&
                    strstr(e, "; NCCL's last error: fake: cudaSetDevice failed"),
                "last error: %s", e);
  shim_test_set_result(st, "ncclCommInitRank", ncclSuccess);
}
END_TEST

START_TEST(test_unique_id_layout) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  memset(&id, 0x55, sizeof(id));
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT(st, "ncclGetUniqueId", U64(&id));
  for (int i = 0; i < 40; i++)
    ck_assert_uint_eq((unsigned char)id.internal[i], FAKE_ID_BYTE);
  /* Bytes 40..127: planccl's bootstrap handle (nonzero magic first) where planccl can run its
   * own part (a CUDA device), else all zero (this id's comms run pass-through). */
  uint64_t magic;
  memcpy(&magic, id.internal + 40, 8);
  if (magic == 0)
    for (int i = 40; i < NCCL_UNIQUE_ID_BYTES; i++)
      ck_assert_int_eq(id.internal[i], 0);
  ck_assert_int_eq(ncclGetUniqueId(NULL), ncclInvalidArgument);
  /* The full 128 bytes reach the real init. */
  ncclComm_t comm;
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 1), ncclSuccess);
  uint64_t id0;
  memcpy(&id0, id.internal, 8);
  int i = shim_test_last(st, "ncclCommInitRank");
  ck_assert_uint_eq(st->calls[i].a[1], 2);
  ck_assert_uint_eq(st->calls[i].a[2], id0);
  ck_assert_uint_eq(st->calls[i].a[3], 1);
  ck_assert_uint_eq(st->calls[i].a[4], magic);
  /* The real library writes its comm into planccl's own slot. */
  ck_assert_uint_ne(st->calls[i].a[0], U64(&comm));
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

START_TEST(test_collectives_forwarded) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 17, ncclBfloat16, ncclMax, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclAllReduce", U64(SBUF), U64(RBUF), 17, ncclBfloat16, ncclMax, U64(real),
         U64(STREAM));
  ck_assert_int_eq(ncclBroadcast(SBUF, RBUF, 18, ncclInt8, 3, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclBroadcast", U64(SBUF), U64(RBUF), 18, ncclInt8, 3, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclReduce(SBUF, RBUF, 19, ncclFloat64, ncclProd, 2, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclReduce", U64(SBUF), U64(RBUF), 19, ncclFloat64, ncclProd, 2, U64(real),
         U64(STREAM));
  ck_assert_int_eq(ncclAllGather(SBUF, RBUF, 20, ncclUint8, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclAllGather", U64(SBUF), U64(RBUF), 20, ncclUint8, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclReduceScatter(SBUF, RBUF, 21, ncclHalf, ncclAvg, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclReduceScatter", U64(SBUF), U64(RBUF), 21, ncclHalf, ncclAvg, U64(real),
         U64(STREAM));
  ck_assert_int_eq(ncclAlltoAll(SBUF, RBUF, 22, ncclInt64, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclAlltoAll", U64(SBUF), U64(RBUF), 22, ncclInt64, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclGather(SBUF, RBUF, 23, ncclFloat8e4m3, 0, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclGather", U64(SBUF), U64(RBUF), 23, ncclFloat8e4m3, 0, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclScatter(SBUF, RBUF, 24, ncclFloat8e5m2, 3, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclScatter", U64(SBUF), U64(RBUF), 24, ncclFloat8e5m2, 3, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclSend(SBUF, 25, ncclUint32, 2, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclSend", U64(SBUF), 25, ncclUint32, 2, U64(real), U64(STREAM));
  ck_assert_int_eq(ncclRecv(RBUF, 26, ncclUint64, 0, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclRecv", U64(RBUF), 26, ncclUint64, 0, U64(real), U64(STREAM));
  /* The profiling twins are the same functions. */
  ck_assert_int_eq(pncclAllReduce(SBUF, RBUF, 27, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclAllReduce", U64(SBUF), U64(RBUF), 27, ncclFloat, ncclSum, U64(real), U64(STREAM));
  /* Return codes come back unchanged, and the real library's message becomes the last error. */
  shim_test_set_result(st, "ncclAllReduce", ncclRemoteError);
  snprintf(st->last_error, sizeof(st->last_error), "fake: peer went away");
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM), ncclRemoteError);
  ck_assert_str_eq(ncclGetLastError(NULL), "fake: peer went away");
  /* ... until planccl itself warns again. */
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, (ncclDataType_t)99, ncclSum, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(comm), "invalid data type 99"));
  shim_test_set_result(st, "ncclSend", ncclInternalError);
  ck_assert_int_eq(ncclSend(SBUF, 1, ncclFloat, 0, comm, STREAM), ncclInternalError);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  EXPECT(st, "ncclCommDestroy", U64(real));
}
END_TEST

START_TEST(test_internal_calls_stay_in_real_library) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  int before = shim_test_count(st, "ncclGetVersion");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  /* The fake's init called its own ncclGetVersion through its PLT and reached itself (planccl's
   * ncclGetVersion never calls the fake after load); bound without RTLD_DEEPBIND (sanitizer
   * builds) the call lands in planccl, which answers it. */
  ck_assert_int_eq(shim_test_count(st, "ncclGetVersion"), before + !SHIM_TEST_SANITIZED);
  char buf[4];
  ck_assert_int_eq(ncclBcast(buf, 4, ncclInt8, 1, comm, STREAM), ncclSuccess);
  int b = shim_test_last(st, "ncclBcast");
  EXPECT(st, "ncclBcast", U64(buf), 4, ncclInt8, 1, U64(real), U64(STREAM));
  /* The fake's ncclBcast called its ncclBroadcast with the real comm, and it stayed inside. */
  ck_assert_int_eq(b + 1, shim_test_last(st, "ncclBroadcast"));
  EXPECT(st, "ncclBroadcast", U64(buf), U64(buf), 4, ncclInt8, 1, U64(real), U64(STREAM));
  ck_assert_int_eq(st->foreign_comms, 0);
  /* ncclCommInitAll: the fake's own GetUniqueId, GroupStart, InitRank and GroupEnd stay inside,
   * so planccl's group depth is untouched (GroupEnd here is still an error). */
  ncclComm_t all[3] = {NULL, NULL, NULL};
  int devs[3] = {0, 1, 2};
  ck_assert_int_eq(ncclCommInitAll(all, 3, devs), ncclSuccess);
  int ia = shim_test_last(st, "ncclCommInitAll");
  ck_assert_int_ge(ia, 0);
  ck_assert_uint_eq(st->calls[ia].a[1], 3);
  ck_assert_uint_eq(st->calls[ia].a[2], U64(devs));
  ck_assert_int_eq(shim_test_count(st, "ncclGroupStart"), 1);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  for (int i = 0; i < 3; i++) {
    int r = -1, n = -1;
    ck_assert_ptr_nonnull(all[i]);
    ck_assert_int_eq(ncclCommUserRank(all[i], &r), ncclSuccess);
    ck_assert_int_eq(ncclCommCount(all[i], &n), ncclSuccess);
    ck_assert_int_eq(r, i);
    ck_assert_int_eq(n, 3);
  }
  ck_assert_ptr_ne(all[0], all[1]);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(ncclCommDestroy(all[i]), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(st->live_comms, 0);
  ck_assert_int_eq(st->foreign_comms, 0);
}
END_TEST

START_TEST(test_other_functions_forwarded) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 2, &real);
  int v = -1;
  ck_assert_int_eq(ncclCommCuDevice(comm, &v), ncclSuccess);
  EXPECT(st, "ncclCommCuDevice", U64(real), U64(&v));
  ck_assert_int_eq(v, 2);
  void *mem = NULL;
  ck_assert_int_eq(ncclMemAlloc(&mem, 12345), ncclSuccess);
  EXPECT(st, "ncclMemAlloc", U64(&mem), 12345);
  ck_assert_int_eq(ncclMemFree(mem), ncclSuccess);
  EXPECT(st, "ncclMemFree", U64(mem));
  void *h = NULL;
  ck_assert_int_eq(ncclCommRegister(comm, RBUF, 4096, &h), ncclSuccess);
  EXPECT(st, "ncclCommRegister", U64(real), U64(RBUF), 4096, U64(&h));
  ck_assert_int_eq(ncclCommDeregister(comm, h), ncclSuccess);
  EXPECT(st, "ncclCommDeregister", U64(real), U64(h));
  ncclWindow_t win = NULL;
  ck_assert_int_eq(ncclCommWindowRegister(comm, RBUF, 8192, &win, NCCL_WIN_COLL_SYMMETRIC),
                   ncclSuccess);
  EXPECT(st, "ncclCommWindowRegister", U64(real), U64(RBUF), 8192, U64(&win), 1);
  ck_assert_int_eq(ncclCommWindowDeregister(comm, win), ncclSuccess);
  EXPECT(st, "ncclCommWindowDeregister", U64(real), U64(win));
  shim_test_set_result(st, "ncclCommWindowRegister", ncclInProgress);
  ck_assert_int_eq(ncclCommWindowRegister(comm, RBUF, 8192, &win, 0), ncclInProgress);
  ck_assert_int_eq(ncclCommFinalize(comm), ncclSuccess);
  EXPECT(st, "ncclCommFinalize", U64(real));
  ck_assert_int_eq(ncclCommRevoke(comm, 0), ncclSuccess);
  EXPECT(st, "ncclCommRevoke", U64(real), 0);
  ncclDevComm_t *dc = (ncclDevComm_t *)(uintptr_t)0xdc0;
  const ncclDevCommRequirements_t *req = (const ncclDevCommRequirements_t *)(uintptr_t)0x4e0;
  ck_assert_int_eq(ncclDevCommCreate(comm, req, dc), ncclSuccess);
  EXPECT(st, "ncclDevCommCreate", U64(real), U64(req), U64(dc));
  ck_assert_int_eq(ncclDevCommDestroy(comm, dc), ncclSuccess);
  EXPECT(st, "ncclDevCommDestroy", U64(real), U64(dc));
  ncclTeam_t t = ncclTeamLsa(comm);
  EXPECT(st, "ncclTeamLsa", U64(real));
  ck_assert_int_eq(t.nRanks, 4);
  ck_assert_int_eq(t.rank, 2);
  ck_assert_int_eq(t.stride, 2);
  t = ncclTeamWorld(comm);
  ck_assert_int_eq(t.stride, 1);
  t = ncclTeamRail(comm);
  ck_assert_int_eq(t.stride, 3);
  ck_assert_int_eq(ncclTeamRankToWorld(comm, t, 5), 15);
  EXPECT(st, "ncclTeamRankToWorld", U64(real), 4, 2, 3, 5);
  ck_assert_int_eq(ncclTeamRankToLsa(comm, t, 5), 1005);
  ncclLsaBarrierHandle_t *lh = (ncclLsaBarrierHandle_t *)(uintptr_t)0x1a;
  ncclDevResourceRequirements_t *rr = (ncclDevResourceRequirements_t *)(uintptr_t)0x1b;
  ck_assert_int_eq(ncclLsaBarrierCreateRequirement(t, 7, lh, rr), ncclSuccess);
  EXPECT(st, "ncclLsaBarrierCreateRequirement", 4, 2, 3, 7, U64(lh), U64(rr));
  ncclGinBarrierHandle_t *gh = (ncclGinBarrierHandle_t *)(uintptr_t)0x1c;
  ck_assert_int_eq(ncclGinBarrierCreateRequirement(comm, t, 8, gh, rr), ncclSuccess);
  EXPECT(st, "ncclGinBarrierCreateRequirement", U64(real), 4, 2, 3, 8, U64(gh), U64(rr));
  ncclLLA2AHandle_t *ah = (ncclLLA2AHandle_t *)(uintptr_t)0x1d;
  ck_assert_int_eq(ncclLLA2ACreateRequirement(3, 9, ah, rr), ncclSuccess);
  EXPECT(st, "ncclLLA2ACreateRequirement", 3, 9, U64(ah), U64(rr));
  ck_assert_int_eq(ncclLLA2ACalcSlots(10, 4), 47);
  ncclResetDebugInitInternal();
  ck_assert_int_ge(shim_test_last(st, "ncclResetDebugInitInternal"), 0);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommAbort(comm), ncclSuccess);
  EXPECT(st, "ncclCommAbort", U64(real));
}
END_TEST

START_TEST(test_premulsum_ops) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real, *real2;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  ncclComm_t other = shim_test_make_comm(st, 2, 0, &real2);
  float scalar = 0.5f;
  ncclRedOp_t op;
  ck_assert_int_eq(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm),
                   ncclSuccess);
  EXPECT(st, "ncclRedOpCreatePreMulSum", U64(&op), U64(&scalar), ncclFloat, 1, U64(real));
  ck_assert_int_ge((int)op, (int)ncclNumOps);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, op, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclAllReduce", U64(SBUF), U64(RBUF), 8, ncclFloat, (uint64_t)op, U64(real),
         U64(STREAM));
  /* The op belongs to `comm` only. */
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, op, other, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclRedOpDestroy(op, comm), ncclSuccess);
  EXPECT(st, "ncclRedOpDestroy", (uint64_t)op, U64(real));
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, op, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(other), ncclSuccess);
}
END_TEST

START_TEST(test_argument_checks) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  int before = st->ncalls;
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclNumTypes, ncclSum, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, (ncclDataType_t)-1, ncclSum, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclNumOps, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "invalid reduction operation"));
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, (ncclRedOp_t)-3, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduce(NULL, RBUF, 1, ncclFloat, ncclSum, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "send buffer is NULL"));
  ck_assert_int_eq(ncclAllGather(SBUF, NULL, 1, ncclFloat, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclBroadcast(SBUF, RBUF, 1, ncclFloat, 4, comm, STREAM), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "invalid root 4"));
  ck_assert_int_eq(ncclReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, -1, comm, STREAM),
                   ncclInvalidArgument);
  ck_assert_int_eq(ncclSend(SBUF, 1, ncclFloat, 4, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclRecv(RBUF, 1, ncclFloat, -1, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclRecv(NULL, 1, ncclFloat, 0, comm, STREAM), ncclInvalidArgument);
  /* Rank 1 is the root: the root's buffers are required. */
  ck_assert_int_eq(ncclGather(SBUF, NULL, 1, ncclFloat, 1, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclScatter(NULL, RBUF, 1, ncclFloat, 1, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(ncclBcast(NULL, 1, ncclFloat, 0, comm, STREAM), ncclInvalidArgument);
  ck_assert_int_eq(st->ncalls, before); /* nothing was forwarded */
  /* Legal: zero counts with NULL buffers, and buffers only the root needs. */
  ck_assert_int_eq(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclReduce(SBUF, NULL, 1, ncclFloat, ncclSum, 0, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclGather(SBUF, NULL, 1, ncclFloat, 0, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclScatter(NULL, RBUF, 1, ncclFloat, 3, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclBroadcast(NULL, RBUF, 1, ncclFloat, 0, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclSend(NULL, 0, ncclFloat, 3, comm, STREAM), ncclSuccess);
  /* Query and API arguments. */
  ck_assert_int_eq(ncclCommCount(comm, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclGetVersion(NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommSplit(comm, 0, 0, NULL, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommInitRank(NULL, 2, (ncclUniqueId){{0}}, 0), ncclInvalidArgument);
  ncclComm_t c2;
  ck_assert_int_eq(ncclCommInitRank(&c2, 2, (ncclUniqueId){{0}}, 2), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

START_TEST(test_bad_handles) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  uint64_t junk[64];
  memset(junk, 0x5a, sizeof(junk));
  ncclComm_t bad[] = {NULL, comm, (ncclComm_t)junk, (ncclComm_t)(uintptr_t)0x10,
                      (ncclComm_t)(uintptr_t)0xfffffffffff0ull};
  int before = st->ncalls;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ncclComm_t b = bad[i];
    int v;
    ncclResult_t e;
    ncclComm_t child;
    ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, b, STREAM),
                     ncclInvalidArgument);
    ck_assert_int_eq(ncclSend(SBUF, 1, ncclFloat, 0, b, STREAM), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommCount(b, &v), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommUserRank(b, &v), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommGetAsyncError(b, &e), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommFinalize(b), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommSplit(b, 0, 0, &child, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommRegister(b, RBUF, 1, (void **)&child), ncclInvalidArgument);
    ck_assert_int_eq(ncclTeamWorld(b).rank, -1);
    ck_assert_int_eq(ncclTeamCft(b, 0).rank, -1);
    ck_assert_int_eq(ncclCommSuspend(b, 1), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommQueryProperties(b, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 1, ncclFloat, ncclSum, b, STREAM, NULL),
                     ncclInvalidArgument);
    ck_assert_int_eq(ncclSignal(0, 0, 0, 0, b, STREAM), ncclInvalidArgument);
    if (b != NULL) { /* NULL is a joining rank's comm in a grow */
      ck_assert_int_eq(ncclCommGrow(b, 4, NULL, -1, &child, NULL), ncclInvalidArgument);
    }
    if (b != NULL) {
      ck_assert_int_eq(ncclCommDestroy(b), ncclInvalidArgument);
      ck_assert_int_eq(ncclCommAbort(b), ncclInvalidArgument);
    }
  }
  ck_assert_int_eq(st->ncalls, before); /* no bad handle reached the real library */
  ck_assert_int_eq(ncclCommDestroy(NULL), ncclSuccess);
  ck_assert_int_eq(ncclCommAbort(NULL), ncclSuccess);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "invalid communicator"));
}
END_TEST

START_TEST(test_groups) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  int before = st->ncalls;
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  ck_assert_str_eq(ncclGetLastError(NULL), "ncclGroupEnd: not in a group call.");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
  ck_assert_int_eq(st->ncalls, before); /* refused without forwarding */
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(st->group_depth, 2);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(ncclGroupSimulateEnd(&sim), ncclSuccess);
  ck_assert_float_eq(sim.estimatedTime, 42.0f);
  ck_assert_int_eq(st->group_depth, 0);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  /* The real group end's error comes back, and the depth still drops (as in NCCL). */
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  shim_test_set_result(st, "ncclGroupEnd", ncclSystemError);
  ck_assert_int_eq(ncclGroupEnd(), ncclSystemError);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  /* A failed real start leaves the depth alone. */
  shim_test_set_result(st, "ncclGroupStart", ncclInternalError);
  ck_assert_int_eq(ncclGroupStart(), ncclInternalError);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
}
END_TEST

START_TEST(test_error_strings) {
  setenv("PLANCCL_NCCL_LIB", shim_test_path("PCL_FAKE_NCCL"), 1);
  static const char *const want[] = {
      "no error",
      "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
      "unhandled system error (run with NCCL_DEBUG=INFO for details)",
      "internal error - please report this issue to the NCCL developers",
      "invalid argument (run with NCCL_DEBUG=WARN for details)",
      "invalid usage (run with NCCL_DEBUG=WARN for details)",
      "remote process exited or there was a network error",
      "NCCL operation in progress",
  };
  for (int i = 0; i < 8; i++)
    ck_assert_str_eq(ncclGetErrorString((ncclResult_t)i), want[i]);
  /* ncclTimeout (2.30.3) as the 2.32.6 library words it; 9 is 2.32's ncclNumResults. */
  ck_assert_str_eq(ncclGetErrorString((ncclResult_t)PCL_NCCL_TIMEOUT), "timeout");
  ck_assert_str_eq(ncclGetErrorString((ncclResult_t)9), "unknown result code");
  ck_assert_str_eq(ncclGetErrorString((ncclResult_t)-1), "unknown result code");
  ck_assert_str_eq(pncclGetErrorString(ncclInProgress), want[7]);
  ck_assert_str_eq(ncclGetLastError(NULL), "");
}
END_TEST

START_TEST(test_missing_symbol_disables_one_function) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL_PARTIAL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  ck_assert_int_eq(ncclAlltoAll(SBUF, RBUF, 1, ncclFloat, comm, STREAM), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "ncclAlltoAll"));
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* A function newer than the real library (the partial fake lacks one of each release): the call
 * is refused with ncclInvalidUsage and ONE WARN, at its first call, naming the function, the real
 * library's version and the release that added it; none for them at load or at later calls. */
START_TEST(test_missing_newer_functions) {
  char log[512];
  char *dir = shim_test_log_dir(log, sizeof(log));
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL_PARTIAL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 2, 0, &real);
  /* At load, a WARN for the 2.28 function it lacks only. */
  int w0 = shim_test_count_lines(log, "PLANCCL WARN", NULL);
  ck_assert_int_eq(w0, 1);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "lacks ncclAlltoAll"), 1);
  int before = st->ncalls;
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclInvalidUsage);
  const char *e = ncclGetLastError(NULL);
  ck_assert_msg(strstr(e, "ncclCommSuspend") && strstr(e, "2.29.99") && strstr(e, "since 2.29.7"),
                "last error: %s", e);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), w0 + 1);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclInvalidUsage);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), w0 + 1);
  const pcl_coll_config_t *cfg = (const pcl_coll_config_t *)(uintptr_t)0xc0f1;
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM, cfg),
                   ncclInvalidUsage);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "ncclAllReduceConfig"), 1);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "since 2.31.2"), 1);
  void *p = (void *)1;
  ck_assert_int_eq(ncclGetPeerDevicePointer((ncclWindow_t)(uintptr_t)0x3180, 0, 1, &p),
                   ncclInvalidUsage);
  ck_assert_ptr_eq(p, (void *)1);
  ck_assert_int_eq(ncclTeamCft(comm, 0).rank, -1);
  ncclParamDumpAll();
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", NULL), w0 + 5);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "ncclParamDumpAll"), 1);
  ck_assert_int_eq(st->ncalls, before); /* nothing reached the fake */
  /* The functions it has are forwarded as ever. */
  ck_assert_int_eq(ncclCommResume(comm), ncclSuccess);
  EXPECT(st, "ncclCommResume", U64(real));
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* NCCL 2.29's communicator functions and the 2.31 teams: planccl's comm becomes the real one,
 * every other argument arrives unchanged, the fake's answers come back. */
START_TEST(test_comm_functions_232_forwarded) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 2, &real);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclSuccess);
  EXPECT(st, "ncclCommSuspend", U64(real), 1);
  ck_assert_int_eq(ncclCommResume(comm), ncclSuccess);
  EXPECT(st, "ncclCommResume", U64(real));
  uint64_t bytes = 0;
  ck_assert_int_eq(ncclCommMemStats(comm, (pcl_comm_mem_stat_t)2, &bytes), ncclSuccess);
  EXPECT(st, "ncclCommMemStats", U64(real), 2, U64(&bytes));
  ck_assert_uint_eq(bytes, 4098);
  ncclUniqueId id;
  ck_assert_int_eq(ncclCommGetUniqueId(comm, &id), ncclSuccess);
  EXPECT(st, "ncclCommGetUniqueId", U64(real), U64(&id));
  ck_assert_uint_eq((unsigned char)id.internal[0], FAKE_ID_BYTE + 1);
  pcl_comm_properties_t *props = (pcl_comm_properties_t *)(uintptr_t)0x9090;
  ck_assert_int_eq(ncclCommQueryProperties(comm, props), ncclSuccess);
  EXPECT(st, "ncclCommQueryProperties", U64(real), U64(props));
  ncclWindow_t win = NULL;
  ck_assert_int_eq(ncclCommWindowRegister(comm, RBUF, 8192, &win, 0), ncclSuccess);
  void *user = NULL;
  ck_assert_int_eq(ncclWinGetUserPtr(comm, win, &user), ncclSuccess);
  EXPECT(st, "ncclWinGetUserPtr", U64(real), U64(win), U64(&user));
  ck_assert_ptr_eq(user, (void *)((uintptr_t)win + 1));
  ck_assert_int_eq(ncclPutSignal(SBUF, 33, ncclFloat16, 3, win, 128, 2, 1, 0x5u, comm, STREAM),
                   ncclSuccess);
  EXPECT(st, "ncclPutSignal", U64(SBUF), 33, ncclFloat16, 3, U64(win), 128, 2, 1, 5, U64(real),
         U64(STREAM));
  ck_assert_int_eq(ncclSignal(1, 4, 2, 0x7u, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclSignal", 1, 4, 2, 7, U64(real), U64(STREAM));
  pcl_wait_signal_desc_t *descs = (pcl_wait_signal_desc_t *)(uintptr_t)0x5160;
  ck_assert_int_eq(ncclWaitSignal(2, descs, comm, STREAM), ncclSuccess);
  EXPECT(st, "ncclWaitSignal", 2, U64(descs), U64(real), U64(STREAM));
  ncclTeam_t t = ncclTeamCft(comm, 1);
  EXPECT(st, "ncclTeamCft", U64(real));
  ck_assert_int_eq(t.nRanks, 4);
  ck_assert_int_eq(t.rank, 2);
  ck_assert_int_eq(t.stride, 11);
  t = ncclTeamCftMultimem(comm);
  EXPECT(st, "ncclTeamCftMultimem", U64(real));
  ck_assert_int_eq(t.stride, 20);
  /* Return codes come back unchanged. */
  shim_test_set_result(st, "ncclCommSuspend", ncclInvalidUsage);
  ck_assert_int_eq(ncclCommSuspend(comm, 1), ncclInvalidUsage);
  shim_test_set_result(st, "ncclWaitSignal", ncclRemoteError);
  ck_assert_int_eq(ncclWaitSignal(1, descs, comm, STREAM), ncclRemoteError);
  ck_assert_int_eq(ncclCommWindowDeregister(comm, win), ncclSuccess);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* The nccl*Config collectives with a config go to the fake's same function with the real comm and
 * the config pointer untouched (test_shim_config.c: the dispatcher's part, groups). */
START_TEST(test_config_collectives_forwarded) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  const pcl_coll_config_t *cfg = (const pcl_coll_config_t *)(uintptr_t)0xc0f1;
  ck_assert_int_eq(ncclAllReduceConfig(SBUF, RBUF, 17, ncclBfloat16, ncclMax, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclAllReduceConfig", U64(SBUF), U64(RBUF), 17, ncclBfloat16, ncclMax, U64(real),
         U64(STREAM), U64(cfg));
  ck_assert_int_eq(ncclBroadcastConfig(SBUF, RBUF, 18, ncclInt8, 3, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclBroadcastConfig", U64(SBUF), U64(RBUF), 18, ncclInt8, 3, U64(real), U64(STREAM),
         U64(cfg));
  ck_assert_int_eq(ncclReduceConfig(SBUF, RBUF, 19, ncclFloat64, ncclProd, 2, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclReduceConfig", U64(SBUF), U64(RBUF), 19, ncclFloat64, ncclProd, 2, U64(real),
         U64(STREAM), U64(cfg));
  ck_assert_int_eq(ncclAllGatherConfig(SBUF, RBUF, 20, ncclUint8, comm, STREAM, cfg), ncclSuccess);
  EXPECT(st, "ncclAllGatherConfig", U64(SBUF), U64(RBUF), 20, ncclUint8, U64(real), U64(STREAM),
         U64(cfg));
  ck_assert_int_eq(ncclReduceScatterConfig(SBUF, RBUF, 21, ncclHalf, ncclAvg, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclReduceScatterConfig", U64(SBUF), U64(RBUF), 21, ncclHalf, ncclAvg, U64(real),
         U64(STREAM), U64(cfg));
  ck_assert_int_eq(ncclAlltoAllConfig(SBUF, RBUF, 22, ncclInt64, comm, STREAM, cfg), ncclSuccess);
  EXPECT(st, "ncclAlltoAllConfig", U64(SBUF), U64(RBUF), 22, ncclInt64, U64(real), U64(STREAM),
         U64(cfg));
  ck_assert_int_eq(ncclGatherConfig(SBUF, RBUF, 23, ncclFloat8e4m3, 0, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclGatherConfig", U64(SBUF), U64(RBUF), 23, ncclFloat8e4m3, 0, U64(real),
         U64(STREAM), U64(cfg));
  ck_assert_int_eq(ncclScatterConfig(SBUF, RBUF, 24, ncclFloat8e5m2, 3, comm, STREAM, cfg),
                   ncclSuccess);
  EXPECT(st, "ncclScatterConfig", U64(SBUF), U64(RBUF), 24, ncclFloat8e5m2, 3, U64(real),
         U64(STREAM), U64(cfg));
  /* config == NULL is the plain call: forwarded here, it reaches the plain function. */
  ck_assert_int_eq(ncclScatterConfig(SBUF, RBUF, 25, ncclFloat8e5m2, 3, comm, STREAM, NULL),
                   ncclSuccess);
  EXPECT(st, "ncclScatter", U64(SBUF), U64(RBUF), 25, ncclFloat8e5m2, 3, U64(real), U64(STREAM));
  shim_test_set_result(st, "ncclAlltoAllConfig", ncclInternalError);
  ck_assert_int_eq(ncclAlltoAllConfig(SBUF, RBUF, 1, ncclFloat, comm, STREAM, cfg),
                   ncclInternalError);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* Window queries (the window is the real NCCL's handle), device-API requirements, parameters and
 * encryption: no comm, every argument as it came. */
START_TEST(test_windows_params_forwarded) {
  char log[512];
  char *dir = shim_test_log_dir(log, sizeof(log));
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclWindow_t win = (ncclWindow_t)(uintptr_t)0x3180;
  void *p = NULL;
  ck_assert_int_eq(ncclGetPeerDevicePointer(win, 64, 3, &p), ncclSuccess);
  EXPECT(st, "ncclGetPeerDevicePointer", U64(win), 64, 3, U64(&p));
  ck_assert_ptr_eq(p, (void *)(uintptr_t)(0x3180 + 64 + 3));
  ck_assert_int_eq(ncclGetLsaDevicePointer(win, 32, 1, &p), ncclSuccess);
  EXPECT(st, "ncclGetLsaDevicePointer", U64(win), 32, 1, U64(&p));
  ck_assert_int_eq(ncclGetLsaMultimemDevicePointer(win, 16, &p), ncclSuccess);
  EXPECT(st, "ncclGetLsaMultimemDevicePointer", U64(win), 16, U64(&p));
  pcl_multimem_handle_t mm = {(void *)(uintptr_t)0x70000};
  ck_assert_int_eq(ncclGetMultimemDevicePointer(win, 8, mm, &p), ncclSuccess);
  EXPECT(st, "ncclGetMultimemDevicePointer", U64(win), 8, 0x70000, U64(&p));
  ck_assert_ptr_eq(p, (void *)(uintptr_t)0x70008);
  pcl_cft_le_id_t le = 0;
  size_t le_off = 0;
  ck_assert_int_eq(ncclGetPeerDeviceLeInfo(win, 40, 5, &le, &le_off), ncclSuccess);
  EXPECT(st, "ncclGetPeerDeviceLeInfo", U64(win), 40, 5, U64(&le), U64(&le_off));
  ck_assert_uint_eq(le, 5);
  ck_assert_uint_eq(le_off, 40);
  ck_assert_int_eq(ncclGetMultimemDeviceLeInfo(win, 48, &le, &le_off), ncclSuccess);
  EXPECT(st, "ncclGetMultimemDeviceLeInfo", U64(win), 48, U64(&le), U64(&le_off));
  ncclTeam_t t = {4, 2, 3};
  ck_assert_int_eq(ncclGetCftDeviceLeInfo(win, 56, 2, t, &le, &le_off), ncclSuccess);
  EXPECT(st, "ncclGetCftDeviceLeInfo", U64(win), 56, 2, 4, 2, 3, U64(&le), U64(&le_off));
  ck_assert_uint_eq(le, 6);
  ncclDevResourceRequirements_t *rr = (ncclDevResourceRequirements_t *)(uintptr_t)0x1b;
  pcl_gin_outbox_handle_t *oh = (pcl_gin_outbox_handle_t *)(uintptr_t)0x1e;
  ck_assert_int_eq(ncclGinOutboxCreateRequirement(3, 12, oh, rr), ncclSuccess);
  EXPECT(st, "ncclGinOutboxCreateRequirement", 3, 12, U64(oh), U64(rr));
  pcl_gin_inbox_a2a_handle_t *ih = (pcl_gin_inbox_a2a_handle_t *)(uintptr_t)0x1f;
  ck_assert_int_eq(ncclGinInboxA2ACreateRequirement(t, 4, 13, ih, rr), ncclSuccess);
  EXPECT(st, "ncclGinInboxA2ACreateRequirement", 4, 2, 3, 4, 13, U64(ih), U64(rr));
  /* Parameters. */
  const char *key = "NCCL_FAKE_PARAM";
  pcl_param_handle_t h = NULL;
  ck_assert_int_eq(ncclParamBind(&h, key), ncclSuccess);
  EXPECT(st, "ncclParamBind", U64(&h), U64(key));
  ck_assert_ptr_nonnull(h);
  int8_t i8 = 0;
  uint64_t u64 = 0;
  ck_assert_int_eq(ncclParamGetI8(h, &i8), ncclSuccess);
  EXPECT(st, "ncclParamGetI8", U64(h), U64(&i8));
  ck_assert_int_eq(ncclParamGetU64(h, &u64), ncclSuccess);
  EXPECT(st, "ncclParamGetU64", U64(h), U64(&u64));
  ck_assert_int_eq(i8 + (int)u64, 84);
  const char *str = NULL;
  ck_assert_int_eq(ncclParamGetStr(h, &str), ncclSuccess);
  ck_assert_str_eq(str, "42");
  char buf[8];
  int len = -1;
  ck_assert_int_eq(ncclParamGet(h, buf, 8, &len), ncclSuccess);
  EXPECT(st, "ncclParamGet", U64(h), U64(buf), 8, U64(&len));
  ck_assert_int_eq(ncclParamGetParameter(key, &str, &len), ncclSuccess);
  EXPECT(st, "ncclParamGetParameter", U64(key), U64(&str), U64(&len));
  const char **keys = NULL;
  ck_assert_int_eq(ncclParamGetAllParameterKeys(&keys, &len), ncclSuccess);
  ck_assert_int_eq(len, 1);
  ck_assert_str_eq(keys[0], "NCCL_FAKE_PARAM");
  ncclParamDumpAll();
  ck_assert_int_ge(shim_test_last(st, "ncclParamDumpAll"), 0);
  /* Encryption: forwarded, and planccl says once that its own sockets stay plain. */
  const pcl_encryption_config_t *enc = (const pcl_encryption_config_t *)(uintptr_t)0xe7c;
  ck_assert_int_eq(ncclSetEncryption(enc), ncclSuccess);
  EXPECT(st, "ncclSetEncryption", U64(enc));
  ck_assert_int_eq(ncclSetEncryption(enc), ncclSuccess);
  ck_assert_int_eq(shim_test_count_lines(log, "PLANCCL WARN", "not encrypted"), 1);
  shim_test_set_result(st, "ncclGetLsaDevicePointer", ncclInvalidArgument);
  ck_assert_int_eq(ncclGetLsaDevicePointer(win, 0, 9, &p), ncclInvalidArgument);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* Grow: the real NCCL grows into planccl's new comm (an existing rank passes planccl's comm, a
 * joining one NULL); the caller gets planccl's handle, which runs pass-through. */
START_TEST(test_grow) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  void *real;
  ncclComm_t comm = shim_test_make_comm(st, 4, 1, &real);
  ncclUniqueId id;
  ck_assert_int_eq(ncclCommGetUniqueId(comm, &id), ncclSuccess);
  ncclConfig_t *cfg = (ncclConfig_t *)NULL;
  ncclComm_t grown = NULL;
  ck_assert_int_eq(ncclCommGrow(comm, 6, &id, -1, &grown, cfg), ncclSuccess);
  int i = shim_test_last(st, "ncclCommGrow");
  ck_assert_int_ge(i, 0);
  ck_assert_uint_eq(st->calls[i].a[0], U64(real));
  ck_assert_uint_eq(st->calls[i].a[1], 6);
  ck_assert_uint_eq(st->calls[i].a[2], U64(&id));
  ck_assert_uint_eq(st->calls[i].a[3], (uint64_t)-1);
  ck_assert_uint_ne(st->calls[i].a[4], U64(&grown)); /* planccl's own slot */
  ck_assert_uint_eq(st->calls[i].a[5], 0);
  ck_assert_ptr_nonnull(grown);
  void *grown_real = st->last_comm;
  ck_assert_ptr_ne(grown, grown_real);
  int n = 0, r = -1;
  ck_assert_int_eq(ncclCommCount(grown, &n), ncclSuccess);
  ck_assert_int_eq(ncclCommUserRank(grown, &r), ncclSuccess);
  ck_assert_int_eq(n, 6);
  ck_assert_int_eq(r, 1);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 9, ncclFloat, ncclSum, grown, STREAM), ncclSuccess);
  EXPECT(st, "ncclAllReduce", U64(SBUF), U64(RBUF), 9, ncclFloat, ncclSum, U64(grown_real),
         U64(STREAM));
  /* A joining rank: no comm yet. */
  ncclComm_t joined = NULL;
  ck_assert_int_eq(ncclCommGrow(NULL, 6, &id, 5, &joined, NULL), ncclSuccess);
  EXPECT(st, "ncclCommGrow", 0, 6, U64(&id), 5);
  ck_assert_ptr_nonnull(joined);
  ck_assert_int_eq(ncclCommUserRank(joined, &r), ncclSuccess);
  ck_assert_int_eq(r, 5);
  /* Inside a group the real comm arrives at the group end, as for an init. */
  ncclComm_t later = NULL;
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(ncclCommGrow(NULL, 6, &id, 4, &later, NULL), ncclSuccess);
  ck_assert_ptr_nonnull(later);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(ncclCommUserRank(later, &r), ncclSuccess);
  ck_assert_int_eq(r, 4);
  /* A failed grow hands back nothing. */
  shim_test_set_result(st, "ncclCommGrow", ncclSystemError);
  ncclComm_t failed = (ncclComm_t)0x1;
  ck_assert_int_eq(ncclCommGrow(comm, 6, &id, -1, &failed, NULL), ncclSystemError);
  ck_assert_ptr_null(failed);
  ck_assert_int_eq(ncclCommGrow(comm, 6, &id, -1, NULL, NULL), ncclInvalidArgument);
  ck_assert_int_eq(st->foreign_comms, 0);
  ck_assert_int_eq(ncclCommDestroy(grown), ncclSuccess);
  EXPECT(st, "ncclCommDestroy", U64(grown_real));
  ck_assert_int_eq(ncclCommDestroy(joined), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(later), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(st->live_comms, 0);
}
END_TEST

TCase *shim_tcase_forward(void) {
  TCase *tc = tcase_create("forward");
  tcase_add_test(tc, test_unique_id_layout);
  tcase_add_test(tc, test_init_failure_warned);
  tcase_add_test(tc, test_collectives_forwarded);
  tcase_add_test(tc, test_internal_calls_stay_in_real_library);
  tcase_add_test(tc, test_other_functions_forwarded);
  tcase_add_test(tc, test_premulsum_ops);
  tcase_add_test(tc, test_argument_checks);
  tcase_add_test(tc, test_bad_handles);
  tcase_add_test(tc, test_groups);
  tcase_add_test(tc, test_error_strings);
  tcase_add_test(tc, test_missing_symbol_disables_one_function);
  tcase_add_test(tc, test_missing_newer_functions);
  tcase_add_test(tc, test_comm_functions_232_forwarded);
  tcase_add_test(tc, test_config_collectives_forwarded);
  tcase_add_test(tc, test_windows_params_forwarded);
  tcase_add_test(tc, test_grow);
  return tc;
}
