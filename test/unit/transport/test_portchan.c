/* SPDX-License-Identifier: MIT
 * Port channels of a communicator without a GPU: 2, 3 and 4 ranks (threads and processes) build
 * them over TCP on loopback (to every peer, or only between paired "hosts"), register a user
 * buffer while the proxies run, and move data into peers' scratch with flags on every channel,
 * checked byte by byte and counter by counter; bad setups fail. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "bootstrap.h"
#include "mp_launch.h"
#include "param.h"
#include "pcl_test.h"
#include "portchan.h"

#define NCH 2
#define PIECE 4096u /* bytes per (sender, channel) */
#define ROUNDS 3

static pcl_bootstrap_handle_t g_handle;

static unsigned char pattern(int rank, int round, int ch, size_t i) {
  return (unsigned char)(rank * 37 + round * 11 + ch * 5 + i * 13 + (i >> 8));
}

static int wait_token(const pcl_portchan_info_t *in, uint64_t want) {
  double end = pcl_mp_now() + 30;
  const _Atomic uint64_t *tok = (const _Atomic uint64_t *)(uintptr_t)in->local_inbound;
  while (atomic_load_explicit(tok, memory_order_acquire) < want) {
    if (pcl_mp_now() > end)
      return -1;
    sched_yield();
  }
  return 0;
}

/* Round r: every rank fills its user buffer, sends piece (me, k) of it to every peer's scratch
 * at offset (me * NCH + k) * PIECE with a flag on channel k, flushes, waits for every peer's flag
 * on every channel and checks what landed in its own scratch. */
static int pc_rank(int rank, int n, void *arg) {
  (void)arg;
  int rc = 0;
  pcl_bootstrap_t *b = NULL;
  pcl_portchan_t *pc = NULL;
  const size_t scratch_bytes = (size_t)n * NCH * PIECE, user_bytes = (size_t)NCH * PIECE;
  unsigned char *scratch = calloc(1, scratch_bytes), *user = calloc(1, user_bytes);
  uint8_t kind[8];
  uint32_t uid = 0;
  for (int p = 0; p < n; p++)
    kind[p] = p == rank ? PCL_TRANSPORT_NONE : PCL_TRANSPORT_TCP;
  PCL_MP_CHECK(scratch != NULL && user != NULL, 1);
  PCL_MP_CHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 2);
  pcl_portchan_config_t cfg = {.cuda_dev = -1,
                               .nchannels = NCH,
                               .kind = kind,
                               .scratch = scratch,
                               .scratch_bytes = scratch_bytes};
  PCL_MP_CHECK(pcl_portchan_create(b, &cfg, &pc) == ncclSuccess, 3);
  PCL_MP_CHECK(pcl_portchan_nchannels(pc) == NCH, 4);
  PCL_MP_CHECK(
      !pcl_portchan_connected(pc, rank) && pcl_portchan_kind(pc, rank) == PCL_TRANSPORT_NONE, 4);
  /* Registered while the proxy thread already runs: the id is the same on every rank. */
  PCL_MP_CHECK(pcl_portchan_buf_reg(pc, user, user_bytes, NULL, &uid) == ncclSuccess, 5);
  PCL_MP_CHECK(uid == PCL_PORTCHAN_MEM_FIRST_USER, 5);
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < NCH; k++)
      for (size_t i = 0; i < PIECE; i++)
        user[(size_t)k * PIECE + i] = pattern(rank, round, k, i);
    uint64_t last = 0;
    pcl_portchan_info_t info;
    for (int p = 0; p < n; p++) {
      if (p == rank)
        continue;
      PCL_MP_CHECK(pcl_portchan_connected(pc, p) && pcl_portchan_kind(pc, p) == PCL_TRANSPORT_TCP,
                   6);
      for (int k = 0; k < NCH; k++) {
        PCL_MP_CHECK(pcl_portchan_info(pc, p, k, &info) == ncclSuccess, 7);
        uint32_t doff = (uint32_t)((rank * NCH + k) * PIECE);
        last = pcl_fifo_host_push(
            info.fifo, pcl_fifo_w0(PIECE, (uint32_t)(k * PIECE)),
            pcl_fifo_w1(PCL_FIFO_TYPE_DATA | PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC, uid,
                        PCL_PORTCHAN_MEM_SCRATCH, doff, info.chan_id),
            NULL);
      }
    }
    PCL_MP_CHECK(pcl_fifo_host_wait(info.fifo, last, NULL) == 0, 8);
    for (int p = 0; p < n; p++)
      for (int k = 0; p != rank && k < NCH; k++) {
        PCL_MP_CHECK(pcl_portchan_info(pc, p, k, &info) == ncclSuccess, 9);
        PCL_MP_CHECK(wait_token(&info, (uint64_t)round + 1) == 0, 10);
        const unsigned char *got = scratch + (size_t)(p * NCH + k) * PIECE;
        for (size_t i = 0; i < PIECE; i++)
          PCL_MP_CHECK(got[i] == pattern(p, round, k, i), 11);
      }
    PCL_MP_CHECK(pcl_portchan_error(pc) == ncclSuccess, 12);
    /* Nobody refills its user buffer before every peer's proxy sent the previous round. */
    PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 13);
  }
  PCL_MP_CHECK(pcl_portchan_info(pc, rank, 0, &(pcl_portchan_info_t){0}) == ncclInvalidArgument,
               14);
  PCL_MP_CHECK(pcl_portchan_info(pc, (rank + 1) % n, NCH, &(pcl_portchan_info_t){0}) ==
                   ncclInvalidArgument,
               14);
  pcl_portchan_buf_release(pc, uid);
out:
  if (b != NULL && rc == 0)
    (void)pcl_bootstrap_barrier(b);
  pcl_portchan_destroy(pc);
  pcl_bootstrap_destroy(b);
  free(scratch);
  free(user);
  return rc;
}

/* ---- 4 ranks paired across two emulated hosts {0, 1} and {2, 3}: each rank talks only to its
 * partner on the other host (rank ^ 2), as the multi-node plans' port channels do. ---- */

#define PAIR_NCH 4 /* channels per peer, as the executor tests create them */
#define PAIR_ROUNDS 3

typedef enum {
  PAIR_OTHERS_NONE = 0, /* no port channels inside a host */
  PAIR_OTHERS_TCP = 1,  /* TCP channels inside a host too, left unused */
} pair_mode_t;

static unsigned char pair_pattern(int rank, int round, int ch, size_t i) {
  return (unsigned char)(rank * 29 + round * 7 + ch * 3 + i * 11 + (i >> 9) + 1);
}

/* Round r: rank me puts piece k of its user buffer into its partner's scratch at
 * (me * PAIR_NCH + k) * PIECE with a data trigger, then signals with a separate flag trigger, on
 * channel k (one trigger of each per channel, as a plan's put + signal), and flushes last. It then
 * waits for the partner's flag on every channel and checks that exactly the partner's pieces
 * landed, that each inbound counter from the partner reads exactly r + 1, and that no other
 * counter or scratch byte was touched (a flag or put aimed at the wrong rank or channel fails). */
static int pair_rank(int rank, int n, void *arg) {
  const pair_mode_t mode = *(const pair_mode_t *)arg;
  const int partner = rank ^ 2;
  int rc = 0;
  pcl_bootstrap_t *b = NULL;
  pcl_portchan_t *pc = NULL;
  const size_t scratch_bytes = (size_t)n * PAIR_NCH * PIECE, user_bytes = (size_t)PAIR_NCH * PIECE;
  unsigned char *scratch = calloc(1, scratch_bytes), *user = calloc(1, user_bytes);
  uint8_t kind[4];
  uint32_t uid = 0;
  PCL_MP_CHECK(n == 4, 1);
  for (int p = 0; p < n; p++)
    kind[p] = p == rank                                 ? PCL_TRANSPORT_NONE
              : p == partner || mode == PAIR_OTHERS_TCP ? PCL_TRANSPORT_TCP
                                                        : PCL_TRANSPORT_NONE;
  PCL_MP_CHECK(scratch != NULL && user != NULL, 1);
  PCL_MP_CHECK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 2);
  pcl_portchan_config_t cfg = {.cuda_dev = -1,
                               .nchannels = PAIR_NCH,
                               .kind = kind,
                               .scratch = scratch,
                               .scratch_bytes = scratch_bytes};
  PCL_MP_CHECK(pcl_portchan_create(b, &cfg, &pc) == ncclSuccess, 3);
  for (int p = 0; p < n; p++)
    PCL_MP_CHECK(pcl_portchan_connected(pc, p) == (kind[p] != PCL_TRANSPORT_NONE) &&
                     pcl_portchan_kind(pc, p) == (pcl_transport_kind_t)kind[p],
                 4);
  if (mode == PAIR_OTHERS_NONE)
    PCL_MP_CHECK(
        pcl_portchan_info(pc, rank ^ 1, 0, &(pcl_portchan_info_t){0}) == ncclInvalidArgument, 4);
  PCL_MP_CHECK(pcl_portchan_buf_reg(pc, user, user_bytes, NULL, &uid) == ncclSuccess, 5);
  PCL_MP_CHECK(uid == PCL_PORTCHAN_MEM_FIRST_USER, 5);
  /* What each peer exposes, as the executor needs it for a peer without memory channels (the
   * odd half of its double-buffered scratch): only connected peers' regions are known. */
  for (int p = 0; p < n; p++) {
    int known = kind[p] != PCL_TRANSPORT_NONE;
    PCL_MP_CHECK(pcl_portchan_remote_bytes(pc, PCL_PORTCHAN_MEM_SCRATCH, p) ==
                     (known ? scratch_bytes : 0),
                 5);
    PCL_MP_CHECK(pcl_portchan_remote_bytes(pc, uid, p) == (known ? user_bytes : 0), 5);
    PCL_MP_CHECK(pcl_portchan_remote_bytes(pc, PCL_PORTCHAN_MEM_SEMS, p) ==
                     (known ? (size_t)n * PAIR_NCH * sizeof(uint64_t) : 0),
                 5);
    PCL_MP_CHECK(pcl_portchan_remote_bytes(pc, uid + 1, p) == 0, 5); /* never registered */
  }
  for (int round = 0; round < PAIR_ROUNDS; round++) {
    for (int k = 0; k < PAIR_NCH; k++)
      for (size_t i = 0; i < PIECE; i++)
        user[(size_t)k * PIECE + i] = pair_pattern(rank, round, k, i);
    pcl_portchan_info_t info;
    uint64_t last = 0;
    for (int k = 0; k < PAIR_NCH; k++) {
      PCL_MP_CHECK(pcl_portchan_info(pc, partner, k, &info) == ncclSuccess, 6);
      uint32_t doff = (uint32_t)((rank * PAIR_NCH + k) * PIECE);
      (void)pcl_fifo_host_push(
          info.fifo, pcl_fifo_w0(PIECE, (uint32_t)(k * PIECE)),
          pcl_fifo_w1(PCL_FIFO_TYPE_DATA, uid, PCL_PORTCHAN_MEM_SCRATCH, doff, info.chan_id), NULL);
      last = pcl_fifo_host_push(info.fifo, 0,
                                pcl_fifo_w1(PCL_FIFO_TYPE_FLAG, 0, 0, 0, info.chan_id), NULL);
    }
    last = pcl_fifo_host_push(info.fifo, 0, pcl_fifo_w1(PCL_FIFO_TYPE_SYNC, 0, 0, 0, info.chan_id),
                              NULL);
    PCL_MP_CHECK(pcl_fifo_host_wait(info.fifo, last, NULL) == 0, 7);
    for (int k = 0; k < PAIR_NCH; k++) {
      PCL_MP_CHECK(pcl_portchan_info(pc, partner, k, &info) == ncclSuccess, 8);
      PCL_MP_CHECK(wait_token(&info, (uint64_t)round + 1) == 0, 9);
      const unsigned char *got = scratch + (size_t)(partner * PAIR_NCH + k) * PIECE;
      for (size_t i = 0; i < PIECE; i++)
        PCL_MP_CHECK(got[i] == pair_pattern(partner, round, k, i), 10);
    }
    PCL_MP_CHECK(pcl_portchan_error(pc) == ncclSuccess, 11);
    /* Every rank's flags of this round are delivered: each counter must now be exact. */
    PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 12);
    for (int p = 0; p < n; p++)
      for (int k = 0; p != rank && kind[p] != PCL_TRANSPORT_NONE && k < PAIR_NCH; k++) {
        PCL_MP_CHECK(pcl_portchan_info(pc, p, k, &info) == ncclSuccess, 13);
        uint64_t tok = atomic_load((const _Atomic uint64_t *)(uintptr_t)info.local_inbound);
        PCL_MP_CHECK(tok == (p == partner ? (uint64_t)round + 1 : 0), 13);
      }
    for (int p = 0; p < n; p++)
      for (size_t i = 0; p != partner && i < (size_t)PAIR_NCH * PIECE; i++)
        PCL_MP_CHECK(scratch[(size_t)p * PAIR_NCH * PIECE + i] == 0, 14);
    /* Nobody refills its user buffer before its partner's proxy sent the previous round. */
    PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 15);
  }
  pcl_portchan_buf_release(pc, uid);
out:
  if (b != NULL && rc == 0)
    (void)pcl_bootstrap_barrier(b);
  pcl_portchan_destroy(pc);
  pcl_bootstrap_destroy(b);
  free(scratch);
  free(user);
  return rc;
}

static void setup_env(void) {
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
}

START_TEST(test_threads_2_and_3) {
  setup_env();
  for (int n = 2; n <= 3; n++) {
    ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
    ck_assert_int_eq(pcl_mp_run_threads(n, pc_rank, NULL, NULL), 0);
  }
  for (int i = 0; i < 3000 && pcl_bootstrap_roots_active() > 0; i++) /* up to 30 s under load */
    usleep(10000);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_processes_3) {
  setup_env();
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run(3, pc_rank, NULL, 60, NULL), 0);
}
END_TEST

/* 4 ranks as threads: channels only between partners, then to every peer (partners used). */
START_TEST(test_threads_4_paired) {
  setup_env();
  for (int m = PAIR_OTHERS_NONE; m <= PAIR_OTHERS_TCP; m++) {
    pair_mode_t mode = (pair_mode_t)m;
    ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
    ck_assert_int_eq(pcl_mp_run_threads(4, pair_rank, &mode, NULL), 0);
  }
  for (int i = 0; i < 3000 && pcl_bootstrap_roots_active() > 0; i++) /* up to 30 s under load */
    usleep(10000);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_processes_4_paired) {
  setup_env();
  pair_mode_t mode = PAIR_OTHERS_NONE;
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_mp_run(4, pair_rank, &mode, 60, NULL), 0);
}
END_TEST

/* Refused before any collective step, on the calling rank alone. */
START_TEST(test_bad_config) {
  setup_env();
  pcl_bootstrap_t *b = NULL;
  pcl_portchan_t *pc = (pcl_portchan_t *)&b;
  uint8_t kind[1] = {PCL_TRANSPORT_NONE};
  ck_assert_int_eq(pcl_bootstrap_root_create(&g_handle), ncclSuccess);
  ck_assert_int_eq(pcl_bootstrap_create(&g_handle, 0, 1, NULL, &b), ncclSuccess);
  pcl_portchan_config_t cfg = {.cuda_dev = -1, .nchannels = 0, .kind = kind};
  ck_assert_int_eq(pcl_portchan_create(b, &cfg, &pc), ncclInvalidArgument);
  ck_assert_ptr_null(pc);
  cfg.nchannels = PCL_PORTCHAN_MAX_CHANNELS + 1;
  ck_assert_int_eq(pcl_portchan_create(b, &cfg, &pc), ncclInvalidArgument);
  cfg.nchannels = 1;
  cfg.scratch_bytes = 64; /* a size without a buffer */
  ck_assert_int_eq(pcl_portchan_create(b, &cfg, &pc), ncclInvalidArgument);
  kind[0] = PCL_TRANSPORT_CE; /* ignored for self */
  cfg.scratch_bytes = 0;
  ck_assert_int_eq(pcl_portchan_create(b, &cfg, &pc), ncclSuccess);
  ck_assert_int_eq(pcl_portchan_connected(pc, 0), 0);
  pcl_portchan_destroy(pc);
  pcl_bootstrap_destroy(b);
  for (int i = 0; i < 3000 && pcl_bootstrap_roots_active() > 0; i++) /* up to 30 s under load */
    usleep(10000);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("portchan");
  /* Ranks as threads (tag nofork: also run under the sanitizers, which cannot fork a process
   * whose bootstrap root thread runs), then ranks as forked processes. */
  TCase *tc = tcase_create("portchan_threads");
  tcase_set_timeout(tc, 120);
  tcase_set_tags(tc, "nofork");
  tcase_add_test(tc, test_threads_2_and_3);
  tcase_add_test(tc, test_threads_4_paired);
  tcase_add_test(tc, test_bad_config);
  suite_add_tcase(s, tc);
  tc = tcase_create("portchan_processes");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_processes_3);
  tcase_add_test(tc, test_processes_4_paired);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
