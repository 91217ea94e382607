/* SPDX-License-Identifier: MIT
 * The layout decision of comm_layout.h: refusals first (each names the ranks it is about), then
 * the channels. Reads nothing but its arguments, so equal inputs give equal layouts everywhere. */
#include "comm_layout.h"

#include <stdio.h>
#include <string.h>
#include "alloc.h"
#include "portchan.h"

#define WHY(...) snprintf(why, whylen, __VA_ARGS__)

/* Every rank drives a GPU, hosts hold equal numbers of ranks, and plans place ranks
 * k*rpn .. k*rpn+rpn-1 on host k, so rank order must group hosts that way. */
static int check_hosts(const pcl_topo_t *t, char *why, size_t whylen) {
  int n = pcl_topo_nranks(t), rpn = pcl_topo_ranks_per_node(t);
  for (int r = 0; r < n; r++)
    if (pcl_topo_rank_info(t, r)->cuda_dev < 0) {
      WHY("rank %d has no GPU", r);
      return -1;
    }
  if (rpn < 0) {
    for (int r = 1; r < n; r++)
      if (pcl_topo_node_nranks(t, r) != pcl_topo_node_nranks(t, 0)) {
        WHY("hosts hold different numbers of ranks (rank 0's host %d, rank %d's host %d)",
            pcl_topo_node_nranks(t, 0), r, pcl_topo_node_nranks(t, r));
        break;
      }
    return -1;
  }
  for (int r = 0; r < n; r++)
    if (!pcl_topo_same_host(t, r, r - r % rpn) || pcl_topo_local_rank(t, r) != r % rpn) {
      WHY("ranks are not grouped by host: rank %d is not on the host of rank %d (plans put "
          "ranks %d..%d on one host)",
          r, r - r % rpn, r - r % rpn, r - r % rpn + rpn - 1);
      return -1;
    }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++)
      if (a != b && pcl_topo_same_host(t, a, b) && !pcl_topo_peer_access(t, a, b)) {
        WHY("no peer access from rank %d's GPU to rank %d's", a, b);
        return -1;
      }
  return 0;
}

/* The transport between hosts, from every rank's HCA count: the same answer on every rank. */
static int choose_net(const pcl_topo_t *t, const char *net, pcl_comm_layout_t *l, char *why,
                      size_t whylen) {
  int n = pcl_topo_nranks(t), without = -1;
  for (int r = 0; r < n && without < 0; r++)
    if (pcl_topo_rank_info(t, r)->ib_devices == 0)
      without = r;
  if (net == NULL || strcmp(net, "auto") == 0) {
    l->net = without < 0 ? PCL_TRANSPORT_IB : PCL_TRANSPORT_TCP;
    if (without < 0)
      snprintf(l->net_why, sizeof(l->net_why), "every rank has a usable InfiniBand device");
    else
      snprintf(l->net_why, sizeof(l->net_why), "rank %d has no usable InfiniBand device", without);
  } else if (strcmp(net, "tcp") == 0) {
    l->net = PCL_TRANSPORT_TCP;
    snprintf(l->net_why, sizeof(l->net_why), "PLANCCL_NET=tcp");
  } else if (strcmp(net, "ib") == 0) {
    if (without >= 0) {
      WHY("PLANCCL_NET=ib, but rank %d has no usable InfiniBand device", without);
      return -1;
    }
    l->net = PCL_TRANSPORT_IB;
    snprintf(l->net_why, sizeof(l->net_why), "PLANCCL_NET=ib");
  } else {
    WHY("PLANCCL_NET=%s is not auto, ib or tcp", net);
    return -1;
  }
  return 0;
}

/* The channel counts and scratch of the plans selectable for this shape. */
static int check_plans(const pcl_topo_t *t, const pcl_registry_t *reg, int tuned,
                       pcl_comm_layout_t *l, char *why, size_t whylen) {
  int n = pcl_topo_nranks(t), rpn = l->ranks_per_node;
  l->scratch_need = pcl_registry_max_scratch_bytes(reg, n, rpn, UINT64_MAX, tuned);
  if (l->scratch_need == 0) {
    WHY("no plans for %d ranks with %d per host%s", n, rpn,
        l->nnodes > 1 ? " (the multi-node plans are opt-in: "
                        "PLANCCL_PLAN_DIR=<prefix>/share/planccl/plans-extra)"
                      : "");
    return -1;
  }
  l->nmem = pcl_registry_max_channels_per_peer(reg, n, rpn, PCL_PLAN_CHAN_MEMORY, 1, tuned);
  l->nport = pcl_registry_max_channels_per_peer(reg, n, rpn, PCL_PLAN_CHAN_PORT, 0, tuned);
  if (l->nport > PCL_PORTCHAN_MAX_CHANNELS) {
    WHY("plans open %d port channels to one peer (at most %d)", l->nport,
        PCL_PORTCHAN_MAX_CHANNELS);
    return -1;
  }
  if (l->nnodes > 1 && l->nport == 0) {
    WHY("ranks span %d hosts but the plans for %d ranks with %d per host open no port channels",
        l->nnodes, n, rpn);
    return -1;
  }
  return 0;
}

static int fill_channels(const pcl_topo_t *t, pcl_comm_layout_t *l) {
  int n = pcl_topo_nranks(t), me = pcl_topo_rank(t);
  if (PCL_CALLOC(l->mem_connect, (size_t)n, "memory channel peers") == NULL)
    return -1;
  if (l->nport > 0 && PCL_CALLOC(l->port_kind, (size_t)n, "port channel kinds") == NULL)
    return -1;
  for (int r = 0; r < n; r++) {
    int local = pcl_topo_same_host(t, me, r);
    l->mem_connect[r] = (uint8_t)(r != me && local);
    if (l->port_kind != NULL)
      l->port_kind[r] = (uint8_t)(r == me ? PCL_TRANSPORT_NONE : local ? PCL_TRANSPORT_CE : l->net);
  }
  return 0;
}

ncclResult_t pcl_comm_layout_decide(const pcl_topo_t *topo, const pcl_registry_t *reg, int tuned,
                                    const char *net, pcl_comm_layout_t *out, char *why,
                                    size_t whylen) {
  memset(out, 0, sizeof(*out));
  why[0] = '\0';
  out->nnodes = pcl_topo_nnodes(topo);
  out->ranks_per_node = pcl_topo_ranks_per_node(topo);
  out->net = PCL_TRANSPORT_NONE;
  if (check_hosts(topo, why, whylen) != 0 || check_plans(topo, reg, tuned, out, why, whylen) != 0)
    return ncclSuccess;
  if (out->nnodes > 1 && choose_net(topo, net, out, why, whylen) != 0)
    return ncclSuccess;
  if (fill_channels(topo, out) != 0) {
    pcl_comm_layout_free(out);
    WHY("out of memory");
    return ncclSystemError;
  }
  out->ok = 1;
  return ncclSuccess;
}

void pcl_comm_layout_free(pcl_comm_layout_t *l) {
  if (l == NULL)
    return;
  pcl_free(l->mem_connect);
  pcl_free(l->port_kind);
  l->mem_connect = NULL;
  l->port_kind = NULL;
  l->ok = 0;
}
