/* SPDX-License-Identifier: MIT
 * The check of comm_mps.h: processes sharing a GPU without MPS, and the one WARN that says so.
 * The calls still run (on plans where they can: without MPS they are still about twice as fast
 * as NCCL alone, docs/troubleshooting.md); the WARN only says why they are slow. */
#include "comm_mps.h"

#include <stdio.h>
#include <string.h>
#include "log.h"

static int same_gpu(const pcl_topo_rank_t *x, const pcl_topo_rank_t *y) {
  return x->host_hash == y->host_hash && x->cuda_dev >= 0 && y->cuda_dev >= 0 &&
         x->bus_id[0] != '\0' && strncmp(x->bus_id, y->bus_id, PCL_TOPO_BUSID_LEN) == 0;
}

/* Their kernels take turns: different processes on one GPU, not both MPS clients. Threads of one
 * process share a context, so they are never such a pair. */
static int in_turns(const pcl_topo_rank_t *x, const pcl_topo_rank_t *y) {
  return same_gpu(x, y) && x->proc_hash != y->proc_hash && x->mps != PCL_TOPO_MPS_UNKNOWN &&
         y->mps != PCL_TOPO_MPS_UNKNOWN &&
         !(x->mps == PCL_TOPO_MPS_ON && y->mps == PCL_TOPO_MPS_ON);
}

int pcl_comm_mps_check(const pcl_topo_rank_t *r, int n, pcl_comm_mps_report_t *out) {
  out->a = out->b = -1;
  out->ngpus = 0;
  /* GPU by GPU, each found from its lowest rank g, so each counts once without a table. */
  for (int g = 0; g < n; g++) {
    int first = 1, found = 0;
    for (int k = 0; k < g && first; k++)
      first = !same_gpu(&r[k], &r[g]);
    for (int a = g; first && a < n && !found; a++) {
      if (!same_gpu(&r[a], &r[g]))
        continue;
      for (int b = a + 1; b < n && !found; b++) {
        found = in_turns(&r[a], &r[b]);
        if (found && (out->a < 0 || a < out->a)) {
          out->a = a;
          out->b = b;
        }
      }
    }
    out->ngpus += found;
  }
  return out->ngpus;
}

/* One line per communicator, from the lowest rank of the pair it names: every rank holds the
 * same records, so exactly one rank logs without another exchange, and that rank is one of the
 * slow processes, whose log is the one read when its calls are slow. A WARN from every affected
 * process would repeat the same line once per rank in a launcher's merged output. */
int pcl_comm_mps_warn(const pcl_topo_t *t) {
  pcl_comm_mps_report_t rep;
  if (pcl_comm_mps_check(pcl_topo_ranks(t), pcl_topo_nranks(t), &rep) == 0 ||
      pcl_topo_rank(t) != rep.a)
    return 0;
  char more[48] = "";
  if (rep.ngpus > 1)
    snprintf(more, sizeof(more), " (and %d more GPU%s alike)", rep.ngpus - 1,
             rep.ngpus > 2 ? "s" : "");
  PCL_WARN(PCL_LOG_INIT | PCL_LOG_TOPO,
           "ranks %d and %d share GPU %.*s from different processes without MPS%s: their "
           "kernels run in turns, each collective costs milliseconds; start the MPS daemon "
           "(nvidia-cuda-mps-control -d) before the job, see docs/troubleshooting.md",
           rep.a, rep.b, PCL_TOPO_BUSID_LEN, pcl_topo_rank_info(t, rep.a)->bus_id, more);
  return 1;
}
