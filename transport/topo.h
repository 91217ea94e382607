/* SPDX-License-Identifier: MIT
 * Topology: who shares a host (hash of hostname and boot id, or PLANCCL_HOST_ID), who shares a
 * process, which GPU each rank drives (PCI bus id) and which GPUs can map each other's memory.
 * Built collectively over the bootstrap, so every rank holds the same picture. */
#ifndef PCL_TOPO_H
#define PCL_TOPO_H

#include <stdint.h>
#include <nccl.h>
#include "bootstrap.h"
#ifdef __cplusplus
extern "C" {
#endif

#define PCL_TOPO_BUSID_LEN 20

/* pcl_topo_rank_t.mps: 0 (what a zeroed record says) is "unknown", so that made-up or old
 * records never claim that MPS is off. */
enum { PCL_TOPO_MPS_UNKNOWN = 0, PCL_TOPO_MPS_OFF = 1, PCL_TOPO_MPS_ON = 2 };

/* What each rank contributes (all-gathered; fixed layout). */
typedef struct {
  uint64_t host_hash; /* same value <=> same host */
  uint64_t proc_hash; /* same value <=> same process (pid + a per-process random id) */
  int32_t rank;
  int32_t pid;
  int32_t cuda_dev;                /* the rank's device ordinal in its own process; -1: no GPU */
  int32_t numa_node;               /* of the GPU, -1 unknown */
  char bus_id[PCL_TOPO_BUSID_LEN]; /* "0000:3b:00.0" (lowercase), "" without a GPU */
  uint32_t ib_devices;             /* usable InfiniBand/RoCE devices in the rank's process */
  int32_t mps;                     /* PCL_TOPO_MPS_*: the rank's process is an MPS client there */
} pcl_topo_rank_t;

typedef struct pcl_topo pcl_topo_t;

/* Collective over b. cuda_dev < 0 (or no usable GPU/driver) means "no GPU" for this rank. */
ncclResult_t pcl_topo_create(pcl_bootstrap_t *b, int cuda_dev, pcl_topo_t **out);
void pcl_topo_destroy(pcl_topo_t *t); /* NULL ok */
/* Local: the picture `rank` would hold after pcl_topo_create, from every rank's record and the
 * nranks x nranks access matrix (access[a * nranks + b]; NULL = no peer access anywhere). For
 * tests and tools that decide from recorded or made-up topologies. */
ncclResult_t pcl_topo_create_from(int rank, int nranks, const pcl_topo_rank_t *ranks,
                                  const uint8_t *access, pcl_topo_t **out);

int pcl_topo_rank(const pcl_topo_t *t);
int pcl_topo_nranks(const pcl_topo_t *t);
const pcl_topo_rank_t *pcl_topo_rank_info(const pcl_topo_t *t, int rank);
/* Every rank's record, [nranks] in rank order. */
const pcl_topo_rank_t *pcl_topo_ranks(const pcl_topo_t *t);

/* Nodes (hosts) are numbered 0.. in order of their lowest rank. */
int pcl_topo_nnodes(const pcl_topo_t *t);
int pcl_topo_node(const pcl_topo_t *t, int rank);
/* Ranks on the node of `rank`, and the position of `rank` among them (by rank order). */
int pcl_topo_node_nranks(const pcl_topo_t *t, int rank);
int pcl_topo_local_rank(const pcl_topo_t *t, int rank);
/* Ranks per node when every node has the same count, else -1. */
int pcl_topo_ranks_per_node(const pcl_topo_t *t);

int pcl_topo_same_host(const pcl_topo_t *t, int a, int b);
/* The most ranks on one GPU (same host, same PCI bus id); 1 when no rank has a GPU. */
int pcl_topo_max_ranks_per_gpu(const pcl_topo_t *t);
int pcl_topo_same_process(const pcl_topo_t *t, int a, int b);
/* 1 when rank a's GPU can read/write rank b's GPU memory through a peer mapping (same host,
 * checked with cudaDeviceCanAccessPeer from a's process, or the same GPU); 0 otherwise or
 * without GPUs. Same on every rank. */
int pcl_topo_peer_access(const pcl_topo_t *t, int a, int b);

/* This process's host hash (PLANCCL_HOST_ID, else hostname + boot id), exposed for tests. */
uint64_t pcl_topo_local_host_hash(void);

/* The CPUs local to a PCI device ("0000:3b:00.0") as a cpu_set_t-compatible mask written into
 * mask (bytes), from /sys/bus/pci/devices/<bus>/local_cpulist; returns the number of CPUs set,
 * 0 when unknown. */
int pcl_topo_pci_local_cpus(const char *bus_id, void *mask, size_t mask_bytes);

#ifdef __cplusplus
}
#endif
#endif
