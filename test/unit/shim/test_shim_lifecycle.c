/* SPDX-License-Identifier: MIT
 * Communicator lifecycle through planccl against the fake: non-blocking init, init inside a
 * group (the real comm appears at the group end), split and shrink children, scalable init,
 * no leaks over 1000 comms, a real library loaded before planccl, and the no-NCCL path. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nccl_device_int.h"
#include "shim_test.h"

#define STREAM ((cudaStream_t)(uintptr_t)0x5717ea)
#define SBUF ((const void *)(uintptr_t)0x1000)
#define RBUF ((void *)(uintptr_t)0x2000)

static void set_result(struct fake_state *st, const char *name, ncclResult_t r) {
  snprintf(st->results[st->nresults].name, sizeof(st->results[0].name), "%s", name);
  st->results[st->nresults++].result = r;
}

START_TEST(test_nonblocking_init) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  set_result(st, "ncclCommInitRankConfig", ncclInProgress);
  st->async_in_progress = 3;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = NULL;
  ck_assert_int_eq(ncclCommInitRankConfig(&comm, 2, id, 1, &config), ncclInProgress);
  ck_assert_ptr_nonnull(comm); /* valid at once */
  void *real = st->last_comm;
  int i = shim_test_last(st, "ncclCommInitRankConfig");
  ck_assert_uint_eq(st->calls[i].a[4], U64(&config)); /* the caller's config pointer */
  ncclResult_t state = ncclSuccess;
  int polls = 0;
  do {
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    polls++;
  } while (state == ncclInProgress && polls < 100);
  ck_assert_int_eq(state, ncclSuccess);
  ck_assert_int_eq(polls, 4);
  i = shim_test_last(st, "ncclCommGetAsyncError");
  ck_assert_uint_eq(st->calls[i].a[0], U64(real));
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

START_TEST(test_init_inside_group) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {NULL, NULL};
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ck_assert_int_eq(ncclCommInitRankConfig(&comms[r], 2, id, r, NULL), ncclSuccess);
    ck_assert_ptr_nonnull(comms[r]);
  }
  /* Before the group ends the real comms do not exist yet. */
  ncclResult_t state;
  ck_assert_int_eq(ncclCommGetAsyncError(comms[0], &state), ncclSuccess);
  ck_assert_int_eq(state, ncclInProgress);
  int n;
  ck_assert_int_eq(ncclCommCount(comms[0], &n), ncclInvalidArgument);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  /* The real library filled planccl's slots at its group end; planccl reads them lazily. */
  for (int r = 0; r < 2; r++) {
    int rank = -1;
    ck_assert_int_eq(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    ck_assert_int_eq(rank, r);
    ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comms[r], STREAM),
                     ncclSuccess);
  }
  ck_assert_int_eq(st->foreign_comms, 0);
  for (int r = 0; r < 2; r++)
    ck_assert_int_eq(ncclCommDestroy(comms[r]), ncclSuccess);
  ck_assert_int_eq(st->live_comms, 0);
}
END_TEST

START_TEST(test_split_and_shrink_children) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t parent;
  ck_assert_int_eq(ncclCommInitRank(&parent, 4, id, 3), ncclSuccess);
  void *real_parent = st->last_comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclComm_t child = NULL;
  ck_assert_int_eq(ncclCommSplit(parent, 1, 2, &child, &cfg), ncclSuccess);
  void *real_child = st->last_comm;
  int i = shim_test_last(st, "ncclCommSplit");
  ck_assert_uint_eq(st->calls[i].a[0], U64(real_parent));
  ck_assert_uint_eq(st->calls[i].a[1], 1);
  ck_assert_uint_eq(st->calls[i].a[2], 2);
  ck_assert_uint_eq(st->calls[i].a[4], U64(&cfg));
  ck_assert_ptr_nonnull(child);
  ck_assert_ptr_ne(child, real_child);
  ck_assert_ptr_ne(child, parent);
  int rank = -1;
  ck_assert_int_eq(ncclCommUserRank(child, &rank), ncclSuccess);
  ck_assert_int_eq(rank, 2);
  /* The child's rank/size come from the real child: root 3 is valid, 4 is not. */
  ck_assert_int_eq(ncclBroadcast(SBUF, RBUF, 1, ncclFloat, 3, child, STREAM), ncclSuccess);
  i = shim_test_last(st, "ncclBroadcast");
  ck_assert_uint_eq(st->calls[i].a[5], U64(real_child));
  ck_assert_int_eq(ncclBroadcast(SBUF, RBUF, 1, ncclFloat, 4, child, STREAM), ncclInvalidArgument);
  /* NCCL_SPLIT_NOCOLOR: the real split still runs (it is collective) and the child is NULL. */
  ncclComm_t none = (ncclComm_t)(uintptr_t)0x1;
  int splits = shim_test_count(st, "ncclCommSplit");
  ck_assert_int_eq(ncclCommSplit(parent, NCCL_SPLIT_NOCOLOR, 0, &none, NULL), ncclSuccess);
  ck_assert_ptr_null(none);
  ck_assert_int_eq(shim_test_count(st, "ncclCommSplit"), splits + 1);
  /* Shrink. */
  int exclude[1] = {1};
  ncclComm_t shrunk = NULL;
  ck_assert_int_eq(ncclCommShrink(parent, exclude, 1, &shrunk, NULL, NCCL_SHRINK_ABORT),
                   ncclSuccess);
  void *real_shrunk = st->last_comm;
  i = shim_test_last(st, "ncclCommShrink");
  ck_assert_uint_eq(st->calls[i].a[0], U64(real_parent));
  ck_assert_uint_eq(st->calls[i].a[1], U64(exclude));
  ck_assert_uint_eq(st->calls[i].a[2], 1);
  ck_assert_uint_eq(st->calls[i].a[4], 0);
  ck_assert_uint_eq(st->calls[i].a[5], NCCL_SHRINK_ABORT);
  int n = 0;
  ck_assert_int_eq(ncclCommCount(shrunk, &n), ncclSuccess);
  ck_assert_int_eq(n, 3);
  i = shim_test_last(st, "ncclCommCount");
  ck_assert_uint_eq(st->calls[i].a[0], U64(real_shrunk));
  /* A failed split frees the child and returns the error. */
  set_result(st, "ncclCommSplit", ncclRemoteError);
  ncclComm_t failed = (ncclComm_t)(uintptr_t)0x1;
  ck_assert_int_eq(ncclCommSplit(parent, 0, 0, &failed, NULL), ncclRemoteError);
  ck_assert_ptr_null(failed);
  /* Destroying the parent first is legal; children stay usable. */
  ck_assert_int_eq(ncclCommDestroy(parent), ncclSuccess);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, child, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(child), ncclSuccess);
  ck_assert_int_eq(ncclCommAbort(shrunk), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(child), ncclInvalidArgument);
  ck_assert_int_eq(st->live_comms, 0);
  ck_assert_int_eq(st->foreign_comms, 0);
}
END_TEST

START_TEST(test_init_scalable_and_failed_init) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId ids[2];
  ck_assert_int_eq(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ck_assert_int_eq(ncclGetUniqueId(&ids[1]), ncclSuccess);
  ncclComm_t comm = NULL;
  ck_assert_int_eq(ncclCommInitRankScalable(&comm, 8, 5, 2, ids, NULL), ncclSuccess);
  int i = shim_test_last(st, "ncclCommInitRankScalable");
  ck_assert_uint_eq(st->calls[i].a[1], 8);
  ck_assert_uint_eq(st->calls[i].a[2], 5);
  ck_assert_uint_eq(st->calls[i].a[3], 2);
  ck_assert_uint_eq(st->calls[i].a[4], U64(ids));
  ck_assert_int_eq(ncclCommInitRankScalable(&comm, 8, 5, 0, ids, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  /* A failing real init returns its code and leaves no comm behind. */
  set_result(st, "ncclCommInitRank", ncclSystemError);
  ncclComm_t failed = (ncclComm_t)(uintptr_t)0x1;
  ck_assert_int_eq(ncclCommInitRank(&failed, 2, ids[0], 0), ncclSystemError);
  ck_assert_ptr_null(failed);
}
END_TEST

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
      break;
  if (f)
    fclose(f);
  return kb;
}

static int dir_entries(const char *path) {
  DIR *d = opendir(path);
  int n = 0;
  while (d && readdir(d))
    n++;
  if (d)
    closedir(d);
  return n;
}

static int open_fds(void) {
  return dir_entries("/proc/self/fd");
}

/* planccl's allocation counter lives inside the shared library, so leaks are measured from the
 * outside: 1000 create/destroy cycles must not grow RSS, the descriptor count or the threads. */
START_TEST(test_no_leaks_over_many_comms) {
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  float scalar = 2.0f;
  long rss0 = 0;
  int fds0 = 0, threads0 = 0;
  for (int iter = 0; iter < 1100; iter++) {
    if (iter == 100) {
      rss0 = rss_kb();
      fds0 = open_fds();
      threads0 = dir_entries("/proc/self/task");
    }
    ncclComm_t comm, child;
    ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, iter % 2), ncclSuccess);
    ck_assert_int_eq(ncclCommSplit(comm, 0, 0, &child, NULL), ncclSuccess);
    ncclRedOp_t op;
    ck_assert_int_eq(
        ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, child),
        ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, op, child, STREAM), ncclSuccess);
    if (iter % 2)
      ck_assert_int_eq(ncclRedOpDestroy(op, child), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(child), ncclSuccess);
    ck_assert_int_eq(ncclCommAbort(comm), ncclSuccess);
    st->ncalls = 0; /* keep the fake's log from filling up */
  }
  long grown = rss_kb() - rss0;
  ck_assert_msg(grown < 512 || SHIM_TEST_SANITIZED, "RSS grew by %ld kB over 1000 comms", grown);
  ck_assert_int_eq(open_fds(), fds0);
  ck_assert_int_eq(dir_entries("/proc/self/task"), threads0);
  ck_assert_int_eq(st->live_comms, 0);
}
END_TEST

/* The real library was loaded normally before planccl opened it (libtorch's DT_NEEDED when
 * planccl is preloaded under its own soname): its calls to its own public names land in planccl
 * with real comm handles, which planccl must forward back instead of refusing. */
START_TEST(test_real_library_loaded_first) {
  const char *path = shim_test_path("PCL_FAKE_NCCL");
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  ck_assert_ptr_nonnull(h);
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm;
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  void *real = st->last_comm;
  char buf[8];
  ck_assert_int_eq(ncclBcast(buf, 8, ncclInt8, 0, comm, STREAM), ncclSuccess);
  int b = shim_test_last(st, "ncclBcast");
  int bc = shim_test_last(st, "ncclBroadcast");
  ck_assert_int_gt(bc, b);
  ck_assert_uint_eq(st->calls[bc].a[5], U64(real));
  ck_assert_int_eq(st->foreign_comms, 0);
  /* The fake's ncclCommInitAll calls its ncclGetUniqueId, ncclGroupStart, ncclCommInitRank and
   * ncclGroupEnd: they land in planccl, which sees the caller is the real library and forwards
   * them untouched (no wrapping, no change to the application's group depth). */
  ncclComm_t all[2];
  ck_assert_int_eq(ncclCommInitAll(all, 2, NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupEnd(), ncclInvalidUsage);
  for (int r = 0; r < 2; r++) {
    int rank = -1;
    ck_assert_int_eq(ncclCommUserRank(all[r], &rank), ncclSuccess);
    ck_assert_int_eq(rank, r);
    ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, all[r], STREAM), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(all[r]), ncclSuccess);
  }
  ck_assert_int_eq(st->foreign_comms, 0);
  /* A garbage handle from the application is still refused. */
  ck_assert_int_eq(
      ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, (ncclComm_t)(uintptr_t)0x99, STREAM),
      ncclInvalidArgument);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  ck_assert_int_eq(st->live_comms, 0);
  dlclose(h);
}
END_TEST

START_TEST(test_no_real_nccl) {
  char *dir = shim_test_tmpdir();
  char log[512];
  snprintf(log, sizeof(log), "%s/log.txt", dir);
  setenv("PLANCCL_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
  setenv("PLANCCL_DEBUG_FILE", log, 1);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, NCCL_VERSION_CODE);
  ck_assert_str_eq(ncclGetErrorString(ncclInvalidUsage),
                   "invalid usage (run with NCCL_DEBUG=WARN for details)");
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclComm_t comm = NULL;
  void *p;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "PLANCCL_NCCL_LIB"));
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 0), ncclInvalidUsage);
  ck_assert_int_eq(ncclCommInitAll(&comm, 1, NULL), ncclInvalidUsage);
  ck_assert_int_eq(ncclGroupStart(), ncclInvalidUsage);
  ck_assert_int_eq(ncclMemAlloc(&p, 16), ncclInvalidUsage);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 1, ncclFloat, ncclSum, comm, STREAM),
                   ncclInvalidUsage);
  ck_assert_int_eq(ncclSend(SBUF, 1, ncclFloat, 0, comm, STREAM), ncclInvalidUsage);
  ck_assert_int_eq(ncclLLA2ACalcSlots(1, 1), -1);
  /* One WARN for all of them. */
  FILE *f = fopen(log, "r");
  ck_assert_ptr_nonnull(f);
  char line[2048];
  int warns = 0;
  while (fgets(line, sizeof(line), f))
    warns += strstr(line, "no real NCCL library") != NULL;
  fclose(f);
  ck_assert_int_eq(warns, 1);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

static int count_in_file(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int n = 0;
  while (f && fgets(line, sizeof(line), f))
    n += strstr(line, needle) != NULL;
  if (f)
    fclose(f);
  return n;
}

/* Without a CUDA device planccl's part degrades to pass-through with one INFO per comm; the
 * INFO path line names each (collective, size class) once; PLANCCL_STATS prints the table. */
START_TEST(test_passthrough_stats_and_paths) {
  char *dir = shim_test_tmpdir();
  char log[512], err[512];
  snprintf(log, sizeof(log), "%s/log.txt", dir);
  snprintf(err, sizeof(err), "%s/stderr.txt", dir);
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_FILE", log, 1);
  setenv("PLANCCL_STATS", "1", 1);
  setenv("PLANCCL_FORCE_FALLBACK", "allgather,bogus", 1);
  setenv("CUDA_VISIBLE_DEVICES", "", 1); /* no device even on a GPU machine */
  struct fake_state *st = shim_test_use_fake("PCL_FAKE_NCCL");
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  for (int i = 40; i < NCCL_UNIQUE_ID_BYTES; i++)
    ck_assert_int_eq(id.internal[i], 0);
  ncclComm_t comm;
  ck_assert_int_eq(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 4, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 5, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  int before = shim_test_count(st, "ncclAllGather");
  ck_assert_int_eq(ncclAllGather(SBUF, RBUF, 0, ncclFloat, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclAllGather"), before); /* count 0: not forwarded */
  ck_assert_int_eq(ncclSend(SBUF, 0, ncclFloat, 1, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(shim_test_count(st, "ncclSend"), 1); /* zero-count send/recv are kept */
  /* Group of forwarded calls: they reach the real group, which is still open. */
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, ncclSum, comm, STREAM), ncclSuccess);
  ck_assert_int_eq(st->group_depth, 1);
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(st->group_depth, 0);
  /* A child split off the pass-through parent: pass-through too, with no bootstrap of its own,
   * yet its stats name its rank (the real communicator's). */
  ncclComm_t child;
  ck_assert_int_eq(ncclCommSplit(comm, 0, 1, &child, NULL), ncclSuccess);
  ck_assert_int_eq(ncclAllReduce(SBUF, RBUF, 8, ncclFloat, ncclSum, child, STREAM), ncclSuccess);
  fflush(stderr);
  int saved = dup(2);
  int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  ck_assert_int_eq(ncclCommDestroy(child), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
  fflush(stderr);
  dup2(saved, 2);
  close(fd);
  close(saved);
  ck_assert_int_eq(count_in_file(log, "pass-through mode"), 2); /* the parent and the child */
  ck_assert_int_eq(count_in_file(log, "no CUDA device"), 2);
  ck_assert_int_eq(count_in_file(log, "PLANCCL_FORCE_FALLBACK: unknown collective 'bogus'"), 1);
  /* 16 and 20 bytes share size class 2^4: one line; 32 bytes another; the child's 32 bytes a
   * third (one line per communicator and class). */
  ck_assert_int_eq(count_in_file(log, "pcl_path coll=AllReduce"), 3);
  ck_assert_int_eq(count_in_file(log, "path=nccl (pass-through communicator)"), 3);
  ck_assert_int_eq(count_in_file(err, "planccl stats: comm"), 2);
  ck_assert_int_eq(count_in_file(err, "nccl (pass-through communicator)"), 2);
  ck_assert_int_eq(count_in_file(err, "none (count 0)"), 1);
  ck_assert_int_eq(count_in_file(err, "nccl (collective not planned by planccl)"), 1);
  ck_assert_int_eq(count_in_file(err, "0 of 7 calls ran on plans"), 1);
  ck_assert_int_eq(count_in_file(err, "rank 1 of 2, device"), 1); /* the child's */
  ck_assert_int_eq(count_in_file(err, "rank -1"), 0);
  ck_assert_int_eq(count_in_file(err, "rank 1: 0 of 1 calls ran on plans"), 1);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

TCase *shim_tcase_lifecycle(void) {
  TCase *tc = tcase_create("lifecycle");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_nonblocking_init);
  tcase_add_test(tc, test_init_inside_group);
  tcase_add_test(tc, test_split_and_shrink_children);
  tcase_add_test(tc, test_init_scalable_and_failed_init);
  tcase_add_test(tc, test_no_leaks_over_many_comms);
  tcase_add_test(tc, test_real_library_loaded_first);
  tcase_add_test(tc, test_no_real_nccl);
  tcase_add_test(tc, test_passthrough_stats_and_paths);
  return tc;
}
