/* SPDX-License-Identifier: MIT
 * What a communicator's topology lets planccl build: hosts and ranks per host, memory channels
 * inside a host, port channels (and their transport) between hosts, or why none of it can run. */
#ifndef PCL_COMM_LAYOUT_H
#define PCL_COMM_LAYOUT_H

#include <stdint.h>
#include <nccl.h>
#include "registry.h"
#include "topo.h"
#include "transport.h"

typedef struct {
  int ok;                   /* 0: refused, the reason in the caller's buffer */
  int nnodes;               /* hosts */
  int ranks_per_node;       /* the same on every host when ok */
  pcl_transport_kind_t net; /* port channels between hosts; NONE with one host */
  char net_why[96];         /* why that transport (for the one INFO line) */
  int nmem;                 /* memory channels per connected peer (at least 1) */
  int nport;                /* port channels per connected peer; 0 = no proxy */
  uint64_t scratch_need;    /* bytes the selectable plans need */
  /* [nranks], this rank's row: 1 = memory channels to that peer (same host, peer access). */
  uint8_t *mem_connect;
  /* [nranks]: pcl_transport_kind_t of the port channels to each peer (CE inside a host, `net`
   * between hosts, NONE to self); NULL when nport == 0. */
  uint8_t *port_kind;
} pcl_comm_layout_t;

/* Decides from the shared topology, the registry (with or without its tuning table: `tuned`,
 * agreed by the ranks) and `net` ("auto", "ib" or "tcp": the PLANCCL_NET setting) only, so every
 * rank reaches the same verdict without talking. Fills out (free with pcl_comm_layout_free) and
 * returns ncclSuccess whether or not planccl can run; only running out of memory fails. Refusals
 * say why in `why`. */
ncclResult_t pcl_comm_layout_decide(const pcl_topo_t *topo, const pcl_registry_t *reg, int tuned,
                                    const char *net, pcl_comm_layout_t *out, char *why,
                                    size_t whylen);
void pcl_comm_layout_free(pcl_comm_layout_t *l);

#endif
