/* SPDX-License-Identifier: MIT
 * Ranks as processes posing as hosts (PLANCCL_HOST_ID): the real bootstrap and topology exchange,
 * then the communicator layout (shim/comm/comm_layout.c) decided on every rank from the exchanged
 * facts, checked to be one verdict (refusals with identical reasons, mirrored channels). No GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm_layout.h"
#include "mp_launch.h"

#define NR 4
#define WHYLEN 192

typedef struct {
  pcl_bootstrap_handle_t handle;
  const char *hosts[NR]; /* PLANCCL_HOST_ID of each rank */
  int expect_ok;         /* the layout with GPUs made up is accepted */
} scenario_t;

/* What one rank decided, all-gathered and compared. */
typedef struct {
  int32_t ok, net, nport, nmem, rpn, nnodes;
  uint64_t scratch;
  uint8_t mem[NR], port[NR];
  char why[WHYLEN];
} verdict_t;

static pcl_registry_t *load_plans(void) {
  const char *src = getenv("PCL_SOURCE_DIR");
  char d1[512], d2[512];
  snprintf(d1, sizeof(d1), "%s/plans/allreduce", src ? src : ".");
  snprintf(d2, sizeof(d2), "%s/plans/extra", src ? src : ".");
  const char *dirs[] = {d1, d2};
  pcl_registry_t *reg = NULL;
  return pcl_registry_create(dirs, 2, &reg) == ncclSuccess ? reg : NULL;
}

static void record(verdict_t *v, const pcl_comm_layout_t *l, const char *why) {
  memset(v, 0, sizeof(*v));
  v->ok = l->ok;
  v->net = (int32_t)l->net;
  v->nport = l->nport;
  v->nmem = l->nmem;
  v->rpn = l->ranks_per_node;
  v->nnodes = l->nnodes;
  v->scratch = l->scratch_need;
  for (int r = 0; r < NR && l->ok; r++) {
    v->mem[r] = l->mem_connect[r];
    v->port[r] = l->port_kind != NULL ? l->port_kind[r] : 0;
  }
  snprintf(v->why, sizeof(v->why), "%s", why);
}

/* Every rank's verdict agrees with rank 0's; accepted layouts are mirror images. */
static int same_verdicts(const verdict_t *all, int rank) {
  for (int r = 0; r < NR; r++) {
    const verdict_t *a = &all[r], *z = &all[0];
    if (a->ok != z->ok || a->net != z->net || a->nport != z->nport || a->nmem != z->nmem ||
        a->scratch != z->scratch || strcmp(a->why, z->why) != 0) {
      fprintf(stderr, "rank %d: rank %d decided otherwise than rank 0 (\"%s\" vs \"%s\")\n", rank,
              r, a->why, z->why);
      return 0;
    }
    for (int s = 0; s < NR && a->ok; s++)
      if (a->mem[s] != all[s].mem[r] || a->port[s] != all[s].port[r]) {
        fprintf(stderr, "rank %d: channels %d <-> %d are not symmetric\n", rank, r, s);
        return 0;
      }
  }
  return 1;
}

static int rank_main(int rank, int n, void *arg) {
  const scenario_t *sc = arg;
  int rc = 0;
  pcl_bootstrap_t *boot = NULL;
  pcl_topo_t *topo = NULL, *made = NULL;
  pcl_registry_t *reg = NULL;
  pcl_comm_layout_t l;
  verdict_t all[NR];
  char why[WHYLEN];
  memset(&l, 0, sizeof(l));
  setenv("PLANCCL_HOST_ID", sc->hosts[rank], 1);
  reg = load_plans();
  PCL_MP_CHECK(reg != NULL, 2);
  PCL_MP_CHECK(pcl_bootstrap_create(&sc->handle, rank, n, NULL, &boot) == ncclSuccess, 3);
  PCL_MP_CHECK(pcl_topo_create(boot, -1, &topo) == ncclSuccess, 4);
  PCL_MP_CHECK(pcl_topo_nnodes(topo) == 2, 5);
  for (int r = 0; r < n; r++)
    PCL_MP_CHECK(pcl_topo_same_host(topo, rank, r) == (strcmp(sc->hosts[rank], sc->hosts[r]) == 0),
                 6);
  /* These processes have no GPU: every rank refuses, for the same reason. */
  PCL_MP_CHECK(pcl_comm_layout_decide(topo, reg, 1, "auto", &l, why, sizeof(why)) == ncclSuccess,
               7);
  PCL_MP_CHECK(!l.ok && strcmp(why, "rank 0 has no GPU") == 0, 8);
  /* The exchanged records with a GPU made up for each rank (peer access inside a host). */
  pcl_topo_rank_t recs[NR];
  uint8_t access[NR * NR];
  int all_ib = 1;
  for (int r = 0; r < n; r++) {
    recs[r] = *pcl_topo_rank_info(topo, r);
    recs[r].cuda_dev = 0;
    snprintf(recs[r].bus_id, sizeof(recs[r].bus_id), "0000:%02x:00.0", 0x20 + r);
    all_ib &= recs[r].ib_devices > 0;
    for (int s = 0; s < n; s++)
      access[r * n + s] = (uint8_t)pcl_topo_same_host(topo, r, s);
  }
  PCL_MP_CHECK(pcl_topo_create_from(rank, n, recs, access, &made) == ncclSuccess, 9);
  PCL_MP_CHECK(pcl_comm_layout_decide(made, reg, 1, "auto", &l, why, sizeof(why)) == ncclSuccess,
               10);
  PCL_MP_CHECK(l.ok == sc->expect_ok, 11);
  if (l.ok)
    PCL_MP_CHECK(l.net == (all_ib ? PCL_TRANSPORT_IB : PCL_TRANSPORT_TCP) && l.nnodes == 2 &&
                     l.ranks_per_node == 2,
                 12);
  record(&all[rank], &l, why);
  PCL_MP_CHECK(pcl_bootstrap_allgather(boot, all, sizeof(all[0])) == ncclSuccess, 13);
  PCL_MP_CHECK(same_verdicts(all, rank), 14);
  if (rank == 0)
    printf("%s %s %s %s: %s%s%s\n", sc->hosts[0], sc->hosts[1], sc->hosts[2], sc->hosts[3],
           l.ok ? "planned, " : "refused: ", l.ok ? pcl_transport_name(l.net) : why,
           l.ok ? " between hosts" : "");
  fflush(stdout); /* the rank leaves by _exit */
out:
  pcl_comm_layout_free(&l);
  pcl_topo_destroy(made);
  pcl_topo_destroy(topo);
  pcl_bootstrap_destroy(boot);
  pcl_registry_destroy(reg);
  return rc;
}

static int run(const char *h0, const char *h1, const char *h2, const char *h3, int expect_ok) {
  scenario_t sc = {.hosts = {h0, h1, h2, h3}, .expect_ok = expect_ok};
  if (pcl_bootstrap_root_create(&sc.handle) != ncclSuccess) {
    fprintf(stderr, "bootstrap root failed\n");
    return 1;
  }
  int codes[NR];
  int rc = pcl_mp_run(NR, rank_main, &sc, 60, codes);
  if (rc != 0)
    fprintf(stderr, "scenario %s %s %s %s: rank codes %d %d %d %d\n", h0, h1, h2, h3, codes[0],
            codes[1], codes[2], codes[3]);
  return rc;
}

int main(void) {
  int rc = 0;
  /* 2 hosts x 2 ranks in rank order: the hierarchical plans run, TCP (or IB) between hosts. */
  rc |= run("mn-a", "mn-a", "mn-b", "mn-b", 1);
  /* The same hosts interleaved: refused alike on every rank. */
  rc |= run("mn-a", "mn-b", "mn-a", "mn-b", 0);
  /* 3 + 1: hosts with different rank counts, refused. */
  rc |= run("mn-a", "mn-a", "mn-a", "mn-b", 0);
  return rc == 0 ? 0 : 1;
}
