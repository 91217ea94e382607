/* SPDX-License-Identifier: MIT
 * Ranks that drive one GPU from different processes of a host without MPS joining them: their
 * kernels run in turns, so each collective costs milliseconds. Found from the topology records. */
#ifndef PCL_COMM_MPS_H
#define PCL_COMM_MPS_H

#include "topo.h"

typedef struct {
  int a, b;  /* the pair to name: a the lowest rank of any such pair, b its lowest partner; -1 */
  int ngpus; /* GPUs (host and bus id) that hold at least one such pair */
} pcl_comm_mps_report_t;

/* Pure: from every rank's record (ranks[n], the all-gathered ones, so every rank reaches the same
 * report). Two ranks are such a pair when they share a host (host_hash) and a GPU (bus id), not
 * a process (proc_hash), both know their MPS state and not both are MPS clients. Unknown MPS on
 * either side is no pair: only a known state warns. Returns out->ngpus (0: nothing to report). */
int pcl_comm_mps_check(const pcl_topo_rank_t *ranks, int n, pcl_comm_mps_report_t *out);

/* Logs the communicator's one WARN about such pairs, on rank report.a only; returns 1 when this
 * rank logged it. */
int pcl_comm_mps_warn(const pcl_topo_t *t);

#endif
