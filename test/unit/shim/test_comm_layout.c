/* SPDX-License-Identifier: MIT
 * The communicator layout (comm_layout.c) on made-up topologies against the shipped default and
 * opt-in plans: one host, hosts x ranks with and without HCAs, PLANCCL_NET, and every refusal
 * (no GPU, unequal hosts, hosts not grouped in rank order, no peer access, no plans). No GPU. */
#include <stdio.h>
#include <string.h>
#include "comm_layout.h"
#include "pcl_test.h"

#define MAXR 16

static pcl_registry_t *reg_all;     /* default + opt-in allreduce plans */
static pcl_registry_t *reg_default; /* default plans only */
static long long base_allocs;       /* the registries' own allocations */

/* Nothing but the fixture's registries is still allocated. */
#define ASSERT_NO_LEAKS() ck_assert_int_eq(pcl_alloc_outstanding(), base_allocs)

static void setup(void) {
  const char *src = getenv("PCL_SOURCE_DIR");
  ck_assert_ptr_nonnull(src);
  char d1[512], d2[512];
  snprintf(d1, sizeof(d1), "%s/plans/allreduce", src);
  snprintf(d2, sizeof(d2), "%s/plans/extra/allreduce", src);
  const char *all[] = {d1, d2};
  ck_assert_int_eq(pcl_registry_create(all, 2, &reg_all), ncclSuccess);
  ck_assert_int_eq(pcl_registry_create(all, 1, &reg_default), ncclSuccess);
  base_allocs = (long long)pcl_alloc_outstanding();
}

static void teardown(void) {
  pcl_registry_destroy(reg_all);
  pcl_registry_destroy(reg_default);
  reg_all = reg_default = NULL;
}

/* A topology of n ranks seen from `me`: rank r on host host[r], a GPU each (gpu[r] == 0: none),
 * ib[r] HCAs (NULL: none), peer access between every two GPUs of a host unless no_access. */
typedef struct {
  int n;
  int host[MAXR];
  int nogpu[MAXR];
  int ib[MAXR];
  int no_access;
} shape_t;

static pcl_topo_t *make_topo(const shape_t *s, int me) {
  pcl_topo_rank_t recs[MAXR];
  uint8_t access[MAXR * MAXR];
  memset(recs, 0, sizeof(recs));
  memset(access, 0, sizeof(access));
  for (int r = 0; r < s->n; r++) {
    recs[r].host_hash = 0x1000u + (uint64_t)s->host[r] * 2 + 1;
    recs[r].proc_hash = 0x9000u + (uint64_t)r;
    recs[r].rank = r;
    recs[r].cuda_dev = s->nogpu[r] ? -1 : r % 8;
    recs[r].numa_node = -1;
    if (!s->nogpu[r])
      snprintf(recs[r].bus_id, sizeof(recs[r].bus_id), "0000:%02x:00.0", 0x10 + r % 8);
    recs[r].ib_devices = (uint32_t)s->ib[r];
  }
  for (int a = 0; a < s->n; a++)
    for (int b = 0; b < s->n; b++)
      access[a * s->n + b] =
          (uint8_t)(!s->no_access && s->host[a] == s->host[b] && !s->nogpu[a] && !s->nogpu[b]);
  pcl_topo_t *t = NULL;
  ck_assert_int_eq(pcl_topo_create_from(me, s->n, recs, access, &t), ncclSuccess);
  return t;
}

/* Decides as rank `me`; returns ok and leaves the reason in why. */
static int decide(const shape_t *s, int me, const pcl_registry_t *reg, const char *net,
                  pcl_comm_layout_t *l, char *why, size_t whylen) {
  pcl_topo_t *t = make_topo(s, me);
  ck_assert_int_eq(pcl_comm_layout_decide(t, reg, 1, net, l, why, whylen), ncclSuccess);
  pcl_topo_destroy(t);
  return l->ok;
}

static shape_t hosts_x(int nhosts, int per) {
  shape_t s;
  memset(&s, 0, sizeof(s));
  s.n = nhosts * per;
  for (int r = 0; r < s.n; r++)
    s.host[r] = r / per;
  return s;
}

/* Refused, with a reason that contains `needle`. */
static void expect_refused(const shape_t *s, const pcl_registry_t *reg, const char *net,
                           const char *needle) {
  pcl_comm_layout_t l;
  char why[256];
  for (int me = 0; me < s->n; me++) {
    ck_assert_int_eq(decide(s, me, reg, net, &l, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, needle) != NULL, "rank %d: \"%s\" lacks \"%s\"", me, why, needle);
    ck_assert_ptr_null(l.mem_connect);
    ck_assert_ptr_null(l.port_kind);
  }
}

START_TEST(test_one_host) {
  shape_t s = hosts_x(1, 2);
  pcl_comm_layout_t l;
  char why[256];
  ck_assert_int_eq(decide(&s, 1, reg_default, "auto", &l, why, sizeof(why)), 1);
  ck_assert_int_eq(l.nnodes, 1);
  ck_assert_int_eq(l.ranks_per_node, 2);
  ck_assert_int_eq(l.net, PCL_TRANSPORT_NONE);
  ck_assert_int_ge(l.nmem, 1);
  ck_assert_uint_gt(l.scratch_need, 0);
  ck_assert_int_eq(l.mem_connect[0], 1);
  ck_assert_int_eq(l.mem_connect[1], 0);
  /* The default 2-rank plans use memory channels only: no proxy. */
  ck_assert_int_eq(l.nport, 0);
  ck_assert_ptr_null(l.port_kind);
  pcl_comm_layout_free(&l);
  ASSERT_NO_LEAKS();
}
END_TEST

/* 2 hosts x 2 ranks: memory channels inside a host, port channels over TCP between hosts (no
 * HCA anywhere), CE port channels inside a host; every rank's view is the mirror of its peers'. */
START_TEST(test_two_hosts_tcp) {
  shape_t s = hosts_x(2, 2);
  pcl_comm_layout_t l[4];
  char why[256];
  for (int me = 0; me < 4; me++) {
    ck_assert_msg(decide(&s, me, reg_all, "auto", &l[me], why, sizeof(why)), "rank %d: %s", me,
                  why);
    ck_assert_int_eq(l[me].nnodes, 2);
    ck_assert_int_eq(l[me].ranks_per_node, 2);
    ck_assert_int_eq(l[me].net, PCL_TRANSPORT_TCP);
    ck_assert_ptr_nonnull(strstr(l[me].net_why, "rank 0 has no usable InfiniBand"));
    ck_assert_int_ge(l[me].nport, 1);
    ck_assert_ptr_nonnull(l[me].port_kind);
  }
  for (int a = 0; a < 4; a++) {
    ck_assert_int_eq(l[a].nport, l[0].nport);
    ck_assert_int_eq(l[a].nmem, l[0].nmem);
    ck_assert_uint_eq(l[a].scratch_need, l[0].scratch_need);
    for (int b = 0; b < 4; b++) {
      int local = a / 2 == b / 2;
      ck_assert_int_eq(l[a].mem_connect[b], a != b && local);
      ck_assert_int_eq(l[a].mem_connect[b], l[b].mem_connect[a]);
      ck_assert_int_eq(l[a].port_kind[b], a == b  ? PCL_TRANSPORT_NONE
                                          : local ? PCL_TRANSPORT_CE
                                                  : PCL_TRANSPORT_TCP);
      ck_assert_int_eq(l[a].port_kind[b], l[b].port_kind[a]);
    }
  }
  for (int me = 0; me < 4; me++)
    pcl_comm_layout_free(&l[me]);
  /* What such a communicator's calls select: the hierarchical plan for 2 hosts x 2. */
  const pcl_plan_t *p = pcl_registry_select(reg_all, PCL_PLAN_COLL_ALLREDUCE, 4, 2, 0, 4096);
  ck_assert_ptr_nonnull(p);
  ck_assert_str_eq(p->name, "allreduce_2x2gpu_hier_ll_outofplace");
  /* One host of 4 takes a single-node plan. */
  const pcl_plan_t *q = pcl_registry_select(reg_all, PCL_PLAN_COLL_ALLREDUCE, 4, 4, 0, 4096);
  ck_assert_ptr_nonnull(q);
  ck_assert_ptr_null(strstr(q->name, "hier"));
  ASSERT_NO_LEAKS();
}
END_TEST

/* InfiniBand when every rank has an HCA; PLANCCL_NET forces either, and ib is refused, on every
 * rank alike, when one rank lacks an HCA. */
START_TEST(test_net_choice) {
  shape_t s = hosts_x(2, 2);
  pcl_comm_layout_t l;
  char why[256];
  for (int r = 0; r < 4; r++)
    s.ib[r] = 1;
  ck_assert_int_eq(decide(&s, 0, reg_all, "auto", &l, why, sizeof(why)), 1);
  ck_assert_int_eq(l.net, PCL_TRANSPORT_IB);
  ck_assert_ptr_nonnull(strstr(l.net_why, "every rank"));
  ck_assert_int_eq(l.port_kind[1], PCL_TRANSPORT_CE);
  ck_assert_int_eq(l.port_kind[2], PCL_TRANSPORT_IB);
  ck_assert_int_eq(l.mem_connect[2], 0);
  pcl_comm_layout_free(&l);
  ck_assert_int_eq(decide(&s, 1, reg_all, "tcp", &l, why, sizeof(why)), 1);
  ck_assert_int_eq(l.net, PCL_TRANSPORT_TCP);
  ck_assert_int_eq(l.port_kind[3], PCL_TRANSPORT_TCP);
  pcl_comm_layout_free(&l);
  ck_assert_int_eq(decide(&s, 3, reg_all, "ib", &l, why, sizeof(why)), 1);
  ck_assert_int_eq(l.net, PCL_TRANSPORT_IB);
  pcl_comm_layout_free(&l);
  s.ib[1] = 0;
  ck_assert_int_eq(decide(&s, 0, reg_all, NULL, &l, why, sizeof(why)), 1);
  ck_assert_int_eq(l.net, PCL_TRANSPORT_TCP);
  ck_assert_ptr_nonnull(strstr(l.net_why, "rank 1 has no usable"));
  pcl_comm_layout_free(&l);
  expect_refused(&s, reg_all, "ib", "PLANCCL_NET=ib, but rank 1 has no usable InfiniBand");
  expect_refused(&s, reg_all, "rdma", "PLANCCL_NET=rdma is not auto, ib or tcp");
  ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_refusals) {
  shape_t s = hosts_x(2, 2);
  s.nogpu[2] = 1;
  expect_refused(&s, reg_all, "auto", "rank 2 has no GPU");
  s = hosts_x(2, 2);
  s.host[2] = 0; /* 3 ranks on host 0, 1 on host 1 */
  expect_refused(&s, reg_all, "auto",
                 "hosts hold different numbers of ranks (rank 0's host 3, "
                 "rank 3's host 1)");
  s = hosts_x(2, 2);
  s.host[1] = 1;
  s.host[2] = 0; /* hosts interleaved: 0 2 | 1 3 */
  expect_refused(&s, reg_all, "auto",
                 "ranks are not grouped by host: rank 1 is not on the host "
                 "of rank 0");
  s = hosts_x(1, 2);
  s.no_access = 1;
  expect_refused(&s, reg_all, "auto", "no peer access from rank 0's GPU to rank 1's");
  /* The multi-node plans are opt-in: the default set has none, and says where they are. */
  s = hosts_x(2, 2);
  expect_refused(&s, reg_default, "auto",
                 "no plans for 4 ranks with 2 per host (the multi-node "
                 "plans are opt-in");
  s = hosts_x(3, 1);
  expect_refused(&s, reg_all, "auto", "no plans for 3 ranks with 1 per host");
  ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_topo_from_records) {
  pcl_topo_rank_t recs[3];
  memset(recs, 0, sizeof(recs));
  recs[0].host_hash = recs[2].host_hash = 7;
  recs[1].host_hash = 9;
  pcl_topo_t *t = NULL;
  ck_assert_int_eq(pcl_topo_create_from(2, 3, recs, NULL, &t), ncclSuccess);
  ck_assert_int_eq(pcl_topo_rank(t), 2);
  ck_assert_int_eq(pcl_topo_nnodes(t), 2);
  ck_assert_int_eq(pcl_topo_node(t, 2), 0);
  ck_assert_int_eq(pcl_topo_node(t, 1), 1);
  ck_assert_int_eq(pcl_topo_local_rank(t, 2), 1);
  ck_assert_int_eq(pcl_topo_ranks_per_node(t), -1);
  ck_assert_int_eq(pcl_topo_peer_access(t, 0, 2), 0);
  pcl_topo_destroy(t);
  ck_assert_int_eq(pcl_topo_create_from(3, 3, recs, NULL, &t), ncclInvalidArgument);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(pcl_topo_create_from(0, 0, recs, NULL, &t), ncclInvalidArgument);
  ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_comm_layout(void) {
  TCase *tc = tcase_create("comm_layout");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60); /* the plans load in each test's process, slowly under TSan */
  tcase_add_test(tc, test_one_host);
  tcase_add_test(tc, test_two_hosts_tcp);
  tcase_add_test(tc, test_net_choice);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_topo_from_records);
  return tc;
}
