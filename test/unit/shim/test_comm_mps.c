/* SPDX-License-Identifier: MIT
 * The check for processes sharing a GPU without MPS (comm_mps.c) on made-up records: which
 * shapes report a pair and which do not, the pair it names, and that exactly one rank of a
 * communicator logs the WARN. No GPU. */
#include <stdio.h>
#include <string.h>
#include "comm_mps.h"
#include "log.h"
#include "pcl_test.h"

#define MAXR 8
#define OFF PCL_TOPO_MPS_OFF
#define ON PCL_TOPO_MPS_ON
#define UNKNOWN PCL_TOPO_MPS_UNKNOWN

/* Rank r: on host `host`, in process `proc` (of that host), on GPU 0000:<bus>:00.0 (bus < 0: no
 * GPU), MPS state `mps`. */
static void rec(pcl_topo_rank_t *recs, int r, int host, int proc, int bus, int mps) {
  pcl_topo_rank_t *x = &recs[r];
  memset(x, 0, sizeof(*x));
  x->host_hash = 0x1000u + (uint64_t)host * 2 + 1;
  x->proc_hash = 0x9000u + (uint64_t)host * 64 + (uint64_t)proc;
  x->rank = r;
  x->cuda_dev = bus < 0 ? -1 : 0;
  x->numa_node = -1;
  if (bus >= 0)
    snprintf(x->bus_id, sizeof(x->bus_id), "0000:%02x:00.0", bus);
  x->mps = mps;
}

static int check(const pcl_topo_rank_t *recs, int n, pcl_comm_mps_report_t *rep) {
  int got = pcl_comm_mps_check(recs, n, rep);
  ck_assert_int_eq(got, rep->ngpus);
  if (got == 0) {
    ck_assert_int_eq(rep->a, -1);
    ck_assert_int_eq(rep->b, -1);
  }
  return got;
}

/* Ranks 0..n-1 on host 0, rank i in process proc[i] on GPU bus[i], MPS off. */
static void one_host(pcl_topo_rank_t *r, int n, const int *proc, const int *bus) {
  for (int i = 0; i < n; i++)
    rec(r, i, 0, proc[i], bus[i], OFF);
}

static void expect_report(const pcl_topo_rank_t *r, int n, int ngpus, int a, int b) {
  pcl_comm_mps_report_t rep;
  ck_assert_int_eq(check(r, n, &rep), ngpus);
  ck_assert_int_eq(rep.a, a);
  ck_assert_int_eq(rep.b, b);
}

/* Two ranks: rank 0 on host 0, process 0, GPU 0x3b, MPS mps0; rank 1 as the case says. */
typedef struct {
  const char *what;
  int host, proc, bus, mps0, mps1;
  int pair; /* reported, as ranks 0 and 1 */
} pair_case_t;

static const pair_case_t pair_cases[] = {
    /* Threads of one process share a context: never reported, whatever MPS says. */
    {"threads of one process on one GPU", 0, 0, 0x3b, OFF, OFF, 0},
    {"processes on their own GPUs", 0, 1, 0x5e, OFF, OFF, 0},
    {"processes on one GPU under MPS", 0, 1, 0x3b, ON, ON, 0},
    {"processes on one GPU without MPS", 0, 1, 0x3b, OFF, OFF, 1},
    /* One MPS client and one plain context still take turns. */
    {"an MPS client and a plain context", 0, 1, 0x3b, OFF, ON, 1},
    /* Unknown on either side (an older runtime, an error) is no pair. */
    {"MPS unknown on both", 0, 1, 0x3b, UNKNOWN, UNKNOWN, 0},
    {"MPS unknown on rank 0", 0, 1, 0x3b, UNKNOWN, OFF, 0},
    {"MPS unknown on rank 1", 0, 1, 0x3b, OFF, UNKNOWN, 0},
    /* The same bus id on two hosts is two GPUs. */
    {"different hosts, the same bus id", 1, 1, 0x3b, OFF, OFF, 0},
    /* Ranks without a GPU (empty bus id) share none. */
    {"processes without a GPU", 0, 1, -1, OFF, OFF, 0},
};
#define NPAIR_CASES ((int)(sizeof(pair_cases) / sizeof(pair_cases[0])))

START_TEST(test_pair) {
  const pair_case_t *c = &pair_cases[_i];
  pcl_topo_rank_t r[2];
  pcl_comm_mps_report_t rep;
  rec(r, 0, 0, 0, c->bus < 0 ? -1 : 0x3b, c->mps0);
  rec(r, 1, c->host, c->proc, c->bus, c->mps1);
  ck_assert_msg(check(r, 2, &rep) == c->pair, "%s: %d GPUs reported", c->what, rep.ngpus);
  expect_report(r, 2, c->pair, c->pair ? 0 : -1, c->pair ? 1 : -1);
  expect_report(r, 0, 0, -1, -1);
}
END_TEST

/* Several GPUs: each counts once, and the pair named is the lowest rank of any pair with its
 * lowest partner, even when that GPU's own lowest rank is in no pair. */
START_TEST(test_several_gpus) {
  pcl_topo_rank_t r[MAXR];
  /* Two hosts x 4 processes, two GPUs per host, two processes on each. */
  for (int i = 0; i < 8; i++)
    rec(r, i, i / 4, i % 4, 0x10 + i % 2, OFF);
  expect_report(r, 8, 4, 0, 2);
  /* Host 0's first GPU: rank 0 unknown, rank 2 alone with it; host 1 under MPS. */
  r[0].mps = UNKNOWN;
  for (int i = 4; i < 8; i++)
    r[i].mps = ON;
  expect_report(r, 8, 1, 1, 3);
  /* Three ranks on one GPU, the two lowest threads of one process: the pair is 0 and 2. */
  const int proc3[] = {0, 0, 1}, bus3[] = {0x3b, 0x3b, 0x3b};
  one_host(r, 3, proc3, bus3);
  expect_report(r, 3, 1, 0, 2);
  /* The lowest rank of the later GPU is lower than any pair's on the earlier one. */
  const int proc5[] = {0, 1, 2, 3, 4}, bus5[] = {0x10, 0x20, 0x20, 0x10, 0x10};
  one_host(r, 5, proc5, bus5);
  r[0].mps = UNKNOWN;
  expect_report(r, 5, 2, 1, 2);
}
END_TEST

/* The WARN over every rank's view of one communicator: logged by rank rep.a alone; returns how
 * many ranks logged. */
static int warn_all(const pcl_topo_rank_t *recs, int n) {
  int logged = 0;
  for (int me = 0; me < n; me++) {
    pcl_topo_t *t = NULL;
    ck_assert_int_eq(pcl_topo_create_from(me, n, recs, NULL, &t), ncclSuccess);
    int did = pcl_comm_mps_warn(t);
    pcl_topo_destroy(t);
    if (did) {
      pcl_comm_mps_report_t rep;
      pcl_comm_mps_check(recs, n, &rep);
      ck_assert_int_eq(me, rep.a);
    }
    logged += did;
  }
  return logged;
}

START_TEST(test_one_warn) {
  pcl_topo_rank_t r[4];
  rec(r, 0, 0, 0, 0x3b, ON);
  rec(r, 1, 0, 1, 0x3b, ON);
  ck_assert_int_eq(warn_all(r, 2), 0);
  ck_assert_str_eq(pcl_log_last_error(), "");
  rec(r, 0, 0, 0, 0x3b, OFF);
  rec(r, 1, 0, 1, 0x3b, OFF);
  ck_assert_int_eq(warn_all(r, 2), 1);
  ck_assert_str_eq(pcl_log_last_error(),
                   "ranks 0 and 1 share GPU 0000:3b:00.0 from different processes without MPS: "
                   "their kernels run in turns, each collective costs milliseconds; start the "
                   "MPS daemon (nvidia-cuda-mps-control -d) before the job, see "
                   "docs/troubleshooting.md");
  for (int i = 0; i < 4; i++)
    rec(r, i, 0, i, 0x3b + i % 2, OFF);
  ck_assert_int_eq(warn_all(r, 4), 1);
  ck_assert_ptr_nonnull(strstr(pcl_log_last_error(),
                               "ranks 0 and 2 share GPU 0000:3b:00.0 from different "
                               "processes without MPS (and 1 more GPU alike): "));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_comm_mps(void) {
  TCase *tc = tcase_create("comm_mps");
  tcase_add_loop_test(tc, test_pair, 0, NPAIR_CASES);
  tcase_add_test(tc, test_several_gpus);
  tcase_add_test(tc, test_one_warn);
  return tc;
}
