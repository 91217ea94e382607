/* SPDX-License-Identifier: MIT
 * The per-thread cache of pcl_comm_lookup (shim/comm/comm.c): a handle a thread already used is
 * refused once destroyed, by this thread or another, even with its magic and real comm put back
 * (so only the registry's generation can refuse it); live comms keep working through it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "comm.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)

static ncclComm_t make(void) {
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  ck_assert_ptr_nonnull(comm);
  return comm;
}

static ncclResult_t call(ncclComm_t comm) {
  return ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM);
}

/* A destroyed comm stays allocated in the graveyard for a while; undo its poisoning so that the
 * magic and real-comm checks would accept it and only the registry can refuse it. */
static void revive(ncclComm_t comm, ncclComm_t real) {
  comm->start_magic = PCL_COMM_START_MAGIC;
  comm->end_magic = PCL_COMM_END_MAGIC;
  __atomic_store_n(&comm->real, real, __ATOMIC_RELEASE);
}

static void expect_refused(struct fake_state *st, ncclComm_t comm) {
  int before = st->ncalls;
  ck_assert_int_eq(call(comm), ncclInvalidArgument);
  ck_assert_int_eq(st->ncalls, before); /* nothing reached the real library */
  const char *why = ncclGetLastError(NULL);
  ck_assert_msg(strstr(why, "invalid communicator") != NULL, "refused for another reason: %s", why);
}

START_TEST(test_lookup_cached_then_destroyed) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclComm_t comm = make();
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(call(comm), ncclSuccess); /* cached from now on */
  ncclComm_t real = pcl_comm_real(comm);
  ck_assert_ptr_nonnull(real);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  expect_refused(st, comm); /* poisoned as destroy left it */
  revive(comm, real);
  expect_refused(st, comm);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommAbort(comm), ncclInvalidArgument);
  comm->start_magic = comm->end_magic = PCL_COMM_DEAD_MAGIC;
  __atomic_store_n(&comm->real, NULL, __ATOMIC_RELEASE);
}
END_TEST

/* More comms than cache slots, used in turn by one thread (nccl-tests' -g N): all keep working,
 * one destroyed in the middle is refused, the others are not disturbed; abort invalidates too. */
START_TEST(test_lookup_many_comms_one_thread) {
  enum { N = 12 };
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclComm_t comms[N], reals[N];
  for (int k = 0; k < N; k++) {
    comms[k] = make();
    reals[k] = pcl_comm_real(comms[k]);
  }
  for (int round = 0; round < 4; round++)
    for (int k = 0; k < N; k++)
      ck_assert_int_eq(call(comms[k]), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comms[3]), ncclSuccess);
  ck_assert_int_eq(ncclCommAbort(comms[7]), ncclSuccess);
  revive(comms[3], reals[3]);
  revive(comms[7], reals[7]);
  for (int round = 0; round < 2; round++)
    for (int k = 0; k < N; k++) {
      if (k == 3 || k == 7)
        expect_refused(st, comms[k]);
      else
        ck_assert_int_eq(call(comms[k]), ncclSuccess);
    }
  for (int k = 0; k < N; k++)
    if (k != 3 && k != 7)
      ck_assert_int_eq(ncclCommDestroy(comms[k]), ncclSuccess);
  for (int k = 0; k < N; k++)
    expect_refused(st, comms[k]);
  ck_assert_int_eq(st->live_comms, 0);
}
END_TEST

/* Thread A caches the handle; the main thread destroys it; A's next call is refused. */
struct two_threads {
  struct fake_state *st;
  ncclComm_t comm, other;
  pthread_barrier_t bar;
  int cached_ok, refused_ok, other_ok;
};

static void *user_thread(void *arg) {
  struct two_threads *t = arg;
  t->cached_ok =
      call(t->comm) == ncclSuccess && call(t->comm) == ncclSuccess && call(t->other) == ncclSuccess;
  pthread_barrier_wait(&t->bar); /* 1: cached */
  pthread_barrier_wait(&t->bar); /* 2: destroyed and revived by the main thread */
  int before = t->st->ncalls;
  t->refused_ok = call(t->comm) == ncclInvalidArgument && t->st->ncalls == before &&
                  strstr(ncclGetLastError(NULL), "invalid communicator") != NULL;
  t->other_ok = call(t->other) == ncclSuccess && call(t->other) == ncclSuccess;
  return NULL;
}

START_TEST(test_lookup_destroyed_by_another_thread) {
  struct two_threads t = {.st = shim_test_use_fake("PCL_FAKE_NCCL")};
  t.comm = make();
  t.other = make();
  ncclComm_t real = pcl_comm_real(t.comm);
  ck_assert_int_eq(call(t.comm), ncclSuccess); /* cached in the main thread too */
  pthread_barrier_init(&t.bar, NULL, 2);
  pthread_t th;
  ck_assert_int_eq(pthread_create(&th, NULL, user_thread, &t), 0);
  pthread_barrier_wait(&t.bar);
  ck_assert_int_eq(ncclCommDestroy(t.comm), ncclSuccess);
  revive(t.comm, real);
  pthread_barrier_wait(&t.bar);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  pthread_barrier_destroy(&t.bar);
  ck_assert_msg(t.cached_ok, "calls on live comms failed in the user thread");
  ck_assert_msg(t.refused_ok, "a destroyed comm cached by another thread was not refused");
  ck_assert_msg(t.other_ok, "a live comm failed after another comm's destroy");
  expect_refused(t.st, t.comm);
  ck_assert_int_eq(ncclCommDestroy(t.other), ncclSuccess);
  ck_assert_int_eq(t.st->live_comms, 0);
}
END_TEST

TCase *shim_tcase_lookup(void) {
  TCase *tc = tcase_create("lookup");
  tcase_add_test(tc, test_lookup_cached_then_destroyed);
  tcase_add_test(tc, test_lookup_many_comms_one_thread);
  tcase_add_test(tc, test_lookup_destroyed_by_another_thread);
  return tc;
}
