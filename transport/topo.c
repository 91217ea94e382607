/* SPDX-License-Identifier: MIT
 * Topology discovery: host and process identity, each rank's GPU bus id, the peer-access
 * matrix; every rank computes its own row and the rows are all-gathered. */
#define _GNU_SOURCE
#include "topo.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "alloc.h"
#include "log.h"
#include "param.h"
#include "pcl_check.h"
#include "transport.h"

struct pcl_topo {
  int rank, nranks, nnodes;
  pcl_topo_rank_t *ranks; /* nranks */
  int *node;              /* per rank: node index */
  int *node_nranks;       /* per rank: ranks on its node */
  int *local_rank;        /* per rank */
  uint8_t *access;        /* nranks x nranks: access[a * n + b] */
};

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) {
    h ^= c[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t pcl_topo_local_host_hash(void) {
  uint64_t h = 0xcbf29ce484222325ull;
  const char *id = pcl_param_host_id();
  if (id != NULL)
    return fnv1a(h, id, strlen(id)) | 1;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  h = fnv1a(h, host, strlen(host));
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    char boot[64] = "";
    if (fgets(boot, sizeof(boot), f) != NULL)
      h = fnv1a(h, boot, strlen(boot));
    fclose(f);
  }
  return h | 1;
}

static pthread_once_t proc_once = PTHREAD_ONCE_INIT;
static uint64_t proc_random;
static void proc_init(void) {
  if (getrandom(&proc_random, sizeof(proc_random), 0) != (ssize_t)sizeof(proc_random))
    proc_random = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
}

/* Process identity: pid alone is not unique across hosts/namespaces, nor across fork (the
 * random id is re-drawn in a forked child because the pid differs). */
static uint64_t proc_hash(void) {
  pthread_once(&proc_once, proc_init);
  pid_t pid = getpid();
  uint64_t h = fnv1a(0xcbf29ce484222325ull, &proc_random, sizeof(proc_random));
  return fnv1a(h, &pid, sizeof(pid));
}

static int read_int_file(const char *path, int dflt) {
  FILE *f = fopen(path, "r");
  int v = dflt;
  if (f == NULL)
    return dflt;
  if (fscanf(f, "%d", &v) != 1)
    v = dflt;
  fclose(f);
  return v;
}

/* cudaDevAttrMpsEnabled: the enumerator exists only in newer CUDA 12 headers; its value is the
 * driver's ABI, so older headers build too, and a runtime that does not know it answers an
 * error, which reads as unknown. */
#define PCL_ATTR_MPS_ENABLED ((enum cudaDeviceAttr)133)

/* Whether this process's contexts on cuda_dev go through the MPS server: processes sharing a
 * GPU without it run their kernels in turns (comm_mps.c warns). */
static int32_t gpu_mps(int cuda_dev) {
  int on = 0;
  if (cudaDeviceGetAttribute(&on, PCL_ATTR_MPS_ENABLED, cuda_dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return PCL_TOPO_MPS_UNKNOWN;
  }
  return on ? PCL_TOPO_MPS_ON : PCL_TOPO_MPS_OFF;
}

/* Fills the GPU fields; leaves "no GPU" when the device or the driver is unusable. */
static void fill_gpu(pcl_topo_rank_t *me, int cuda_dev) {
  me->cuda_dev = -1;
  me->numa_node = -1;
  me->mps = PCL_TOPO_MPS_UNKNOWN;
  if (cuda_dev < 0)
    return;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || cuda_dev >= count) {
    (void)cudaGetLastError();
    PCL_INFO(PCL_LOG_TOPO, "topo: no usable GPU %d (%s, %d visible); continuing without a GPU",
             cuda_dev, err != cudaSuccess ? cudaGetErrorString(err) : "out of range", count);
    return;
  }
  char bus[PCL_TOPO_BUSID_LEN];
  err = cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_dev);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    PCL_WARN(PCL_LOG_TOPO, "topo: cudaDeviceGetPCIBusId(%d) failed: %s", cuda_dev,
             cudaGetErrorString(err));
    return;
  }
  for (char *c = bus; *c; c++)
    *c = (char)tolower((unsigned char)*c);
  me->cuda_dev = cuda_dev;
  me->mps = gpu_mps(cuda_dev);
  snprintf(me->bus_id, sizeof(me->bus_id), "%s", bus);
  char path[128];
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", me->bus_id);
  me->numa_node = read_int_file(path, -1);
}

/* My row of the access matrix: can my GPU map peer b's GPU memory? */
static void fill_access_row(pcl_topo_t *t) {
  int n = t->nranks, a = t->rank;
  const pcl_topo_rank_t *me = &t->ranks[a];
  uint8_t *row = &t->access[(size_t)a * n];
  for (int b = 0; b < n; b++) {
    const pcl_topo_rank_t *p = &t->ranks[b];
    row[b] = 0;
    if (me->cuda_dev < 0 || p->cuda_dev < 0 || p->host_hash != me->host_hash)
      continue;
    if (strcmp(p->bus_id, me->bus_id) == 0) {
      row[b] = 1; /* the same GPU: always mappable (IPC or same pointer) */
      continue;
    }
    int peer_dev = -1, can = 0;
    if (cudaDeviceGetByPCIBusId(&peer_dev, p->bus_id) != cudaSuccess) {
      (void)cudaGetLastError(); /* not visible in this process: no peer mapping */
      continue;
    }
    if (cudaDeviceCanAccessPeer(&can, me->cuda_dev, peer_dev) != cudaSuccess) {
      (void)cudaGetLastError();
      can = 0;
    }
    row[b] = can ? 1 : 0;
  }
}

static pcl_topo_t *topo_alloc(int rank, int n) {
  pcl_topo_t *t = NULL;
  if (PCL_CALLOC(t, 1, "topo") == NULL)
    return NULL;
  t->rank = rank;
  t->nranks = n;
  PCL_CALLOC(t->ranks, (size_t)n, "topo ranks");
  PCL_CALLOC(t->node, (size_t)n, "topo nodes");
  PCL_CALLOC(t->node_nranks, (size_t)n, "topo node sizes");
  PCL_CALLOC(t->local_rank, (size_t)n, "topo local ranks");
  PCL_CALLOC(t->access, (size_t)n * (size_t)n, "topo access matrix");
  if (!t->ranks || !t->node || !t->node_nranks || !t->local_rank || !t->access) {
    pcl_topo_destroy(t);
    return NULL;
  }
  return t;
}

/* Nodes in order of first appearance; local rank = position among the node's ranks. A function
 * of the gathered records alone, so every rank derives the same numbering. */
static void derive_nodes(pcl_topo_t *t) {
  int n = t->nranks;
  t->nnodes = 0;
  for (int i = 0; i < n; i++) {
    int nd = -1;
    for (int j = 0; j < i && nd < 0; j++)
      if (t->ranks[j].host_hash == t->ranks[i].host_hash)
        nd = t->node[j];
    if (nd < 0)
      nd = t->nnodes++;
    t->node[i] = nd;
    int lr = 0, cnt = 0;
    for (int j = 0; j < n; j++) {
      if (t->ranks[j].host_hash != t->ranks[i].host_hash)
        continue;
      cnt++;
      if (j < i)
        lr++;
    }
    t->local_rank[i] = lr;
    t->node_nranks[i] = cnt;
  }
}

ncclResult_t pcl_topo_create(pcl_bootstrap_t *b, int cuda_dev, pcl_topo_t **out) {
  ncclResult_t res = ncclSuccess;
  int n = pcl_bootstrap_nranks(b), r = pcl_bootstrap_rank(b);
  pcl_topo_t *t = topo_alloc(r, n);
  if (t == NULL)
    return ncclSystemError;
  pcl_topo_rank_t *me = &t->ranks[r];
  me->host_hash = pcl_topo_local_host_hash();
  me->proc_hash = proc_hash();
  me->rank = r;
  me->pid = (int32_t)getpid();
  fill_gpu(me, cuda_dev);
  me->ib_devices = (uint32_t)pcl_ib_device_count();
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(b, t->ranks, sizeof(pcl_topo_rank_t)), res, err);
  derive_nodes(t);
  fill_access_row(t);
  /* Row i of the matrix is an n-byte slot of the all-gather. */
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(b, t->access, (size_t)n), res, err);
  static const char *const mps_names[] = {"unknown", "off", "on"};
  PCL_INFO(PCL_LOG_TOPO, "topo: rank %d/%d node %d of %d, local rank %d of %d, gpu %d %s, MPS %s",
           r, n, t->node[r], t->nnodes, t->local_rank[r], t->node_nranks[r], me->cuda_dev,
           me->bus_id[0] ? me->bus_id : "(none)", mps_names[me->mps]);
  *out = t;
  return ncclSuccess;
err:
  pcl_topo_destroy(t);
  return res;
}

ncclResult_t pcl_topo_create_from(int rank, int nranks, const pcl_topo_rank_t *ranks,
                                  const uint8_t *access, pcl_topo_t **out) {
  *out = NULL;
  if (nranks < 1 || rank < 0 || rank >= nranks || ranks == NULL) {
    PCL_WARN(PCL_LOG_TOPO, "topo: rank %d of %d records is not a topology", rank, nranks);
    return ncclInvalidArgument;
  }
  pcl_topo_t *t = topo_alloc(rank, nranks);
  if (t == NULL)
    return ncclSystemError;
  memcpy(t->ranks, ranks, sizeof(*ranks) * (size_t)nranks);
  if (access != NULL)
    memcpy(t->access, access, (size_t)nranks * (size_t)nranks);
  derive_nodes(t);
  *out = t;
  return ncclSuccess;
}

void pcl_topo_destroy(pcl_topo_t *t) {
  if (t == NULL)
    return;
  pcl_free(t->ranks);
  pcl_free(t->node);
  pcl_free(t->node_nranks);
  pcl_free(t->local_rank);
  pcl_free(t->access);
  pcl_free(t);
}

int pcl_topo_rank(const pcl_topo_t *t) {
  return t->rank;
}
int pcl_topo_nranks(const pcl_topo_t *t) {
  return t->nranks;
}
static int in_range(const pcl_topo_t *t, int r) {
  return r >= 0 && r < t->nranks;
}
const pcl_topo_rank_t *pcl_topo_rank_info(const pcl_topo_t *t, int r) {
  return in_range(t, r) ? &t->ranks[r] : NULL;
}
const pcl_topo_rank_t *pcl_topo_ranks(const pcl_topo_t *t) {
  return t->ranks;
}
int pcl_topo_nnodes(const pcl_topo_t *t) {
  return t->nnodes;
}
int pcl_topo_node(const pcl_topo_t *t, int r) {
  return in_range(t, r) ? t->node[r] : -1;
}
int pcl_topo_node_nranks(const pcl_topo_t *t, int r) {
  return in_range(t, r) ? t->node_nranks[r] : 0;
}
int pcl_topo_local_rank(const pcl_topo_t *t, int r) {
  return in_range(t, r) ? t->local_rank[r] : -1;
}
int pcl_topo_ranks_per_node(const pcl_topo_t *t) {
  for (int i = 1; i < t->nranks; i++)
    if (t->node_nranks[i] != t->node_nranks[0])
      return -1;
  return t->node_nranks[0];
}
int pcl_topo_max_ranks_per_gpu(const pcl_topo_t *t) {
  int most = 0;
  for (int a = 0; a < t->nranks; a++) {
    int n = 0;
    for (int b = 0; b < t->nranks; b++)
      n += t->ranks[b].host_hash == t->ranks[a].host_hash && t->ranks[a].bus_id[0] != '\0' &&
           strcmp(t->ranks[b].bus_id, t->ranks[a].bus_id) == 0;
    if (n > most)
      most = n;
  }
  return most > 0 ? most : 1;
}
int pcl_topo_same_host(const pcl_topo_t *t, int a, int b) {
  return in_range(t, a) && in_range(t, b) && t->ranks[a].host_hash == t->ranks[b].host_hash;
}
int pcl_topo_same_process(const pcl_topo_t *t, int a, int b) {
  return pcl_topo_same_host(t, a, b) && t->ranks[a].proc_hash == t->ranks[b].proc_hash;
}
int pcl_topo_peer_access(const pcl_topo_t *t, int a, int b) {
  return in_range(t, a) && in_range(t, b) && t->access[(size_t)a * t->nranks + b] != 0;
}

int pcl_topo_pci_local_cpus(const char *bus_id, void *mask, size_t mask_bytes) {
  char path[160], list[4096];
  if (bus_id == NULL || bus_id[0] == '\0')
    return 0;
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/local_cpulist", bus_id);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  char *ok = fgets(list, sizeof(list), f);
  fclose(f);
  if (ok == NULL)
    return 0;
  memset(mask, 0, mask_bytes);
  unsigned char *m = mask;
  int count = 0;
  /* "0-15,32-47" */
  for (char *p = list; *p && *p != '\n';) {
    char *end;
    long lo = strtol(p, &end, 10), hi;
    if (end == p)
      break;
    hi = lo;
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      p = end;
    }
    for (long c = lo; c <= hi && c >= 0 && (size_t)c < mask_bytes * 8; c++) {
      if (!(m[c / 8] & (1u << (c % 8))))
        count++;
      m[c / 8] |= (unsigned char)(1u << (c % 8));
    }
    if (*p == ',')
      p++;
  }
  return count;
}
