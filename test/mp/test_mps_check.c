/* SPDX-License-Identifier: MIT
 * The MPS check (shim/comm/comm_mps.c) on exchanged topology records: ranks as forked processes
 * and as threads run the real bootstrap and topology exchange, then put one made-up GPU with MPS
 * off into the records they received. Processes must report it on exactly one rank, threads on
 * none: the process identities come from the exchange, not from the test. No GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include "comm_mps.h"
#include "log.h"
#include "mp_launch.h"

#define NR 3

typedef struct {
  pcl_bootstrap_handle_t handle;
  int processes; /* the ranks are processes (else threads of this one) */
} scenario_t;

static int rank_main(int rank, int n, void *arg) {
  const scenario_t *sc = arg;
  int rc = 0;
  pcl_bootstrap_t *boot = NULL;
  pcl_topo_t *topo = NULL, *made = NULL;
  pcl_topo_rank_t recs[NR];
  int32_t logged[NR];
  memset(logged, 0, sizeof(logged));
  PCL_MP_CHECK(pcl_bootstrap_create(&sc->handle, rank, n, NULL, &boot) == ncclSuccess, 2);
  PCL_MP_CHECK(pcl_topo_create(boot, -1, &topo) == ncclSuccess, 3);
  /* Without a GPU every rank's MPS state travels as unknown, which reports nothing. */
  for (int r = 0; r < n; r++)
    PCL_MP_CHECK(pcl_topo_rank_info(topo, r)->mps == PCL_TOPO_MPS_UNKNOWN, 4);
  PCL_MP_CHECK(pcl_comm_mps_warn(topo) == 0, 5);
  for (int r = 0; r < n; r++) {
    recs[r] = *pcl_topo_rank_info(topo, r);
    recs[r].cuda_dev = 0;
    snprintf(recs[r].bus_id, sizeof(recs[r].bus_id), "0000:3b:00.0");
    recs[r].mps = PCL_TOPO_MPS_OFF;
  }
  PCL_MP_CHECK(pcl_topo_create_from(rank, n, recs, NULL, &made) == ncclSuccess, 6);
  logged[rank] = pcl_comm_mps_warn(made);
  PCL_MP_CHECK(pcl_bootstrap_allgather(boot, logged, sizeof(logged[0])) == ncclSuccess, 7);
  for (int r = 0; r < n; r++)
    PCL_MP_CHECK(logged[r] == (sc->processes && r == 0), 8);
  if (sc->processes && rank == 0)
    PCL_MP_CHECK(strstr(pcl_log_last_error(), "ranks 0 and 1 share GPU 0000:3b:00.0 from "
                                              "different processes without MPS:") != NULL,
                 9);
out:
  pcl_topo_destroy(made);
  pcl_topo_destroy(topo);
  pcl_bootstrap_destroy(boot);
  return rc;
}

static int run(int processes) {
  scenario_t sc = {.processes = processes};
  if (pcl_bootstrap_root_create(&sc.handle) != ncclSuccess) {
    fprintf(stderr, "bootstrap root failed\n");
    return 1;
  }
  int codes[NR];
  int rc = processes ? pcl_mp_run(NR, rank_main, &sc, 60, codes)
                     : pcl_mp_run_threads(NR, rank_main, &sc, codes);
  if (rc != 0)
    fprintf(stderr, "%s: rank codes %d %d %d\n", processes ? "processes" : "threads", codes[0],
            codes[1], codes[2]);
  return rc;
}

int main(void) {
  int rc = run(0);
  rc |= run(1);
  return rc == 0 ? 0 : 1;
}
