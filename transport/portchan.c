/* SPDX-License-Identifier: MIT
 * Port channels: the collective setup of one communicator's proxy (connections, semaphores,
 * memory ids, channels) and of user buffers registered later while the proxy runs. */
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "cuda_check.h"
#include "log.h"
#include "pcl_check.h"
#include "portchan.h"
#include "proxy.h"

/* One rank's contribution to an exchange. */
typedef struct {
  int32_t status;
  uint32_t reserved;
  pcl_mem_remote_t exp[2];
} slot_t;

struct pcl_portchan {
  pcl_bootstrap_t *boot;
  int rank, nranks, dev, nch;
  uint8_t *kind;          /* [nranks] */
  pcl_memchan_t *memchan; /* CE mappings; may be NULL */
  pcl_proxy_t *proxy;
  uint64_t *sems; /* [0, n) inbound tokens, [n, 2n) expected; n = nranks*nch; device memory, or
                     host memory without a GPU (cuda_dev < 0: CPU tests, TCP only) */
  pcl_memchan_buf_t *sem_buf; /* the inbound tokens mapped for CE peers */
  uint32_t next_id;           /* next user memory id (advances alike on every rank) */
  /* Exchange buffers allocated at create, so a later registration never fails to take part in
   * a collective step for want of memory (its peers would wait for it). */
  slot_t *xslots;   /* [nranks] */
  int32_t *xstatus; /* [nranks] */
};

/* All-gathers the local statuses; every rank returns the first failure (by rank) or success. */
static ncclResult_t agree(pcl_portchan_t *pc, ncclResult_t local) {
  int32_t *st = pc->xstatus;
  memset(st, 0, (size_t)pc->nranks * sizeof(*st));
  st[pc->rank] = (int32_t)local;
  ncclResult_t res = pcl_bootstrap_allgather(pc->boot, st, sizeof(*st));
  for (int r = 0; res == ncclSuccess && r < pc->nranks; r++)
    if (st[r] != ncclSuccess) {
      if (r != pc->rank)
        PCL_WARN(PCL_LOG_PORT, "port channels: rank %d failed its part of the setup", r);
      res = (ncclResult_t)st[r];
    }
  return res;
}

/* The peer-mapped address of `peer`'s region for the copy engine, 0 when not mapped. */
static uint64_t ce_mapping(const pcl_portchan_t *pc, uint32_t id, int peer,
                           const pcl_memchan_buf_t *mapped) {
  uint64_t bytes;
  pcl_memchan_info_t info;
  if (pc->memchan == NULL)
    return 0;
  if (id == PCL_PORTCHAN_MEM_SCRATCH)
    return pcl_memchan_info(pc->memchan, peer, 0, &info) == ncclSuccess ? info.remote_scratch : 0;
  return mapped != NULL ? pcl_memchan_buf_remote(mapped, peer, &bytes) : 0;
}

/* Records every connected peer's export of region `id` (slot index `which`). */
static ncclResult_t set_remotes(pcl_portchan_t *pc, const slot_t *slots, int which, uint32_t id,
                                const pcl_memchan_buf_t *mapped) {
  for (int p = 0; p < pc->nranks; p++) {
    if (p == pc->rank || pc->kind[p] == PCL_TRANSPORT_NONE)
      continue;
    pcl_mem_remote_t r = slots[p].exp[which];
    if (r.size == 0)
      continue; /* the peer exposes nothing under this id */
    if (pc->kind[p] == PCL_TRANSPORT_CE) {
      r.mapped = ce_mapping(pc, id, p, mapped);
      if (r.mapped == 0) {
        PCL_WARN(PCL_LOG_PORT,
                 "port channels: memory %u of rank %d is not mapped here (the copy "
                 "engine needs it mapped through memory channels)",
                 id, p);
        return ncclInvalidUsage;
      }
    }
    PCL_CHECK(pcl_proxy_mem_set_remote(pc->proxy, id, p, &r));
  }
  return ncclSuccess;
}

static ncclResult_t check_config(const pcl_portchan_config_t *cfg, int nranks, int rank) {
  const char *why = NULL;
  if (cfg->nchannels < 1 || cfg->nchannels > PCL_PORTCHAN_MAX_CHANNELS)
    why = "channels per peer out of range";
  else if ((uint64_t)nranks * (uint64_t)cfg->nchannels > PCL_FIFO_MAX_CHANNELS)
    why = "too many ranks x channels for the proxy's channel ids";
  else if (cfg->scratch == NULL && cfg->scratch_bytes != 0)
    why = "scratch size without a scratch buffer";
  else if (cfg->cuda_dev < 0 && cfg->kind == NULL && nranks > 1)
    why = "without a GPU the transports must be named (no copy engine)";
  for (int p = 0; why == NULL && cfg->kind != NULL && p < nranks; p++) {
    if (p == rank)
      continue; /* no channel to itself, whatever it says */
    if (cfg->kind[p] >= PCL_TRANSPORT_COUNT)
      why = "unknown transport kind";
    else if (cfg->kind[p] == PCL_TRANSPORT_CE && (cfg->memchan == NULL || cfg->cuda_dev < 0))
      why = "copy-engine peers need a GPU and memory channels for the mappings";
  }
  if (why != NULL) {
    PCL_WARN(PCL_LOG_PORT, "port channels: bad configuration: %s (%d channels per peer, %d ranks)",
             why, cfg->nchannels, nranks);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* This rank's local part of create; the caller agrees on the outcome with the other ranks. */
static ncclResult_t setup_local(pcl_portchan_t *pc, const pcl_portchan_config_t *cfg,
                                slot_t *mine) {
  const size_t n = (size_t)pc->nranks * (size_t)pc->nch;
  pcl_proxy_config_t pcfg = {.rank = pc->rank,
                             .nranks = pc->nranks,
                             .cuda_dev = pc->dev,
                             .bus_id = cfg->bus_id,
                             .bootstrap = pc->boot,
                             .abort_flag = cfg->abort_flag};
  if (pc->dev >= 0) {
    PCL_CUDA_CHECK(cudaSetDevice(pc->dev));
    PCL_CUDA_CHECK(cudaMalloc((void **)&pc->sems, 2 * n * sizeof(uint64_t)));
    PCL_CUDA_CHECK(cudaMemset(pc->sems, 0, 2 * n * sizeof(uint64_t)));
    PCL_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    PCL_CALLOC(pc->sems, 2 * n, "portchan host semaphores");
    if (pc->sems == NULL)
      return ncclSystemError;
  }
  PCL_CHECK(pcl_proxy_create(&pcfg, &pc->proxy));
  for (int p = 0; p < pc->nranks; p++)
    if (p != pc->rank && pc->kind[p] != PCL_TRANSPORT_NONE)
      PCL_CHECK(pcl_proxy_connect(pc->proxy, p, (pcl_transport_kind_t)pc->kind[p]));
  if (cfg->scratch != NULL)
    PCL_CHECK(pcl_proxy_mem_reg(pc->proxy, PCL_PORTCHAN_MEM_SCRATCH, cfg->scratch,
                                cfg->scratch_bytes, pc->dev >= 0, 0, &mine->exp[0]));
  PCL_CHECK(pcl_proxy_mem_reg(pc->proxy, PCL_PORTCHAN_MEM_SEMS, pc->sems, n * sizeof(uint64_t),
                              pc->dev >= 0, 0, &mine->exp[1]));
  return ncclSuccess;
}

static ncclResult_t setup_channels(pcl_portchan_t *pc) {
  for (int p = 0; p < pc->nranks; p++) {
    if (p == pc->rank || pc->kind[p] == PCL_TRANSPORT_NONE)
      continue;
    for (int k = 0; k < pc->nch; k++) {
      /* My flags on (p, k) land in p's inbound word for (me, k). */
      pcl_proxy_channel_t ch = {.peer = p,
                                .kind = (pcl_transport_kind_t)pc->kind[p],
                                .sem_mem_id = PCL_PORTCHAN_MEM_SEMS,
                                .sem_off = ((uint64_t)pc->rank * pc->nch + k) * sizeof(uint64_t)};
      PCL_CHECK(pcl_proxy_channel_set(pc->proxy, (uint32_t)(p * pc->nch + k), &ch));
    }
  }
  return ncclSuccess;
}

ncclResult_t pcl_portchan_create(pcl_bootstrap_t *b, const pcl_portchan_config_t *cfg,
                                 pcl_portchan_t **out) {
  ncclResult_t res = ncclSuccess, local;
  pcl_portchan_t *pc = NULL;
  slot_t *slots = NULL;
  int prev = -1;
  const int nranks = pcl_bootstrap_nranks(b);
  *out = NULL;
  /* The configuration is checked before any collective step, so a bad one fails on this rank
   * alone; callers pass the same configuration everywhere. */
  PCL_CHECK(check_config(cfg, nranks, pcl_bootstrap_rank(b)));
  PCL_CALLOC(pc, 1, "portchan");
  if (pc == NULL)
    return ncclSystemError;
  pc->boot = b;
  pc->rank = pcl_bootstrap_rank(b);
  pc->nranks = nranks;
  pc->dev = cfg->cuda_dev;
  pc->nch = cfg->nchannels;
  pc->memchan = cfg->memchan;
  pc->next_id = PCL_PORTCHAN_MEM_FIRST_USER;
  PCL_CALLOC(pc->kind, (size_t)nranks, "portchan kinds");
  PCL_CALLOC(pc->xslots, (size_t)nranks, "portchan exchange slots");
  PCL_CALLOC(pc->xstatus, (size_t)nranks, "portchan exchange status");
  slots = pc->xslots;
  if (pc->kind == NULL || slots == NULL || pc->xstatus == NULL) {
    res = ncclSystemError;
    goto fail_local;
  }
  for (int p = 0; p < nranks; p++)
    pc->kind[p] = p == pc->rank ? PCL_TRANSPORT_NONE
                  : cfg->kind   ? cfg->kind[p]
                                : (uint8_t)PCL_TRANSPORT_CE;
  if (pc->dev >= 0)
    cudaGetDevice(&prev);
  local = setup_local(pc, cfg, &slots[pc->rank]);
  slots[pc->rank].status = (int32_t)local;
  /* Every rank takes part in the exchanges even after a local failure: nobody is left waiting. */
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(b, slots, sizeof(*slots)), res, out_dev);
  if (local == ncclSuccess && pc->memchan != NULL)
    local = pcl_memchan_buf_reg(pc->memchan, pc->sems,
                                (size_t)nranks * (size_t)pc->nch * sizeof(uint64_t), &pc->sem_buf);
  else if (pc->memchan != NULL)
    (void)pcl_memchan_buf_reg(pc->memchan, NULL, 0, &pc->sem_buf); /* collective: still take part */
  for (int r = 0; local == ncclSuccess && r < nranks; r++)
    if (slots[r].status != ncclSuccess)
      local = (ncclResult_t)slots[r].status;
  if (local == ncclSuccess && cfg->scratch != NULL)
    local = set_remotes(pc, slots, 0, PCL_PORTCHAN_MEM_SCRATCH, NULL);
  if (local == ncclSuccess)
    local = set_remotes(pc, slots, 1, PCL_PORTCHAN_MEM_SEMS, pc->sem_buf);
  if (local == ncclSuccess)
    local = setup_channels(pc);
  if (local == ncclSuccess)
    local = pcl_proxy_start(pc->proxy);
  PCL_CHECK_GOTO(agree(pc, local), res, out_dev);
  for (int p = 0; p < nranks; p++)
    if (pc->kind[p] != PCL_TRANSPORT_NONE)
      PCL_INFO(PCL_LOG_PORT, "port channels: rank %d -> rank %d over %s, %d channels", pc->rank, p,
               pcl_transport_name((pcl_transport_kind_t)pc->kind[p]), pc->nch);
  if (prev >= 0)
    cudaSetDevice(prev);
  *out = pc;
  return ncclSuccess;
out_dev:
  if (prev >= 0)
    cudaSetDevice(prev);
fail_local:
  pcl_portchan_destroy(pc);
  return res;
}

void pcl_portchan_destroy(pcl_portchan_t *pc) {
  if (pc == NULL)
    return;
  pcl_proxy_destroy(pc->proxy); /* stops the thread before the memory it may touch goes */
  pcl_memchan_buf_release(pc->sem_buf);
  if (pc->sems != NULL && pc->dev < 0) {
    pcl_free(pc->sems);
  } else if (pc->sems != NULL) {
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(pc->dev);
    cudaFree(pc->sems);
    if (prev >= 0)
      cudaSetDevice(prev);
  }
  pcl_free(pc->kind);
  pcl_free(pc->xslots);
  pcl_free(pc->xstatus);
  pcl_free(pc);
}

void pcl_portchan_on_fail(pcl_portchan_t *pc, pcl_portchan_fail_fn fn, void *arg) {
  if (pc != NULL)
    pcl_proxy_on_fail(pc->proxy, fn, arg);
}

void pcl_portchan_abort(pcl_portchan_t *pc) {
  if (pc != NULL)
    pcl_proxy_abort(pc->proxy);
}

int pcl_portchan_connected(const pcl_portchan_t *pc, int peer) {
  return peer >= 0 && peer < pc->nranks && pc->kind[peer] != PCL_TRANSPORT_NONE;
}

int pcl_portchan_nchannels(const pcl_portchan_t *pc) {
  return pc->nch;
}

pcl_transport_kind_t pcl_portchan_kind(const pcl_portchan_t *pc, int peer) {
  return peer >= 0 && peer < pc->nranks ? (pcl_transport_kind_t)pc->kind[peer] : PCL_TRANSPORT_NONE;
}

ncclResult_t pcl_portchan_info(const pcl_portchan_t *pc, int peer, int channel,
                               pcl_portchan_info_t *out) {
  if (!pcl_portchan_connected(pc, peer) || channel < 0 || channel >= pc->nch) {
    PCL_WARN(PCL_LOG_PORT, "port channels: no channel %d to rank %d (%d per connected peer)",
             channel, peer, pc->nch);
    return ncclInvalidArgument;
  }
  const size_t n = (size_t)pc->nranks * (size_t)pc->nch, i = (size_t)peer * pc->nch + channel;
  out->fifo = pcl_proxy_fifo(pc->proxy);
  out->local_inbound = (uint64_t)(uintptr_t)&pc->sems[i];
  out->local_expected = (uint64_t)(uintptr_t)&pc->sems[n + i];
  out->chan_id = (uint32_t)i;
  return ncclSuccess;
}

uint64_t pcl_portchan_remote_bytes(const pcl_portchan_t *pc, uint32_t id, int peer) {
  pcl_mem_remote_t r;
  if (pc == NULL || !pcl_portchan_connected(pc, peer))
    return 0;
  return pcl_proxy_mem_remote(pc->proxy, id, peer, &r) ? r.size : 0;
}

ncclResult_t pcl_portchan_error(const pcl_portchan_t *pc) {
  return pcl_proxy_error(pc->proxy);
}

void pcl_portchan_expect(pcl_portchan_t *pc) {
  if (pc != NULL)
    pcl_proxy_expect(pc->proxy);
}

ncclResult_t pcl_portchan_buf_reg(pcl_portchan_t *pc, void *ptr, size_t bytes,
                                  const pcl_memchan_buf_t *mapped, uint32_t *id) {
  ncclResult_t res = ncclSuccess, local = ncclSuccess;
  slot_t *slots = pc->xslots;
  const uint32_t mid = pc->next_id++; /* every rank advances alike, failures included */
  int registered = 0;
  memset(slots, 0, (size_t)pc->nranks * sizeof(*slots));
  if (mid >= PCL_FIFO_MAX_MEMORIES) {
    PCL_WARN(PCL_LOG_PORT,
             "port channels: all %u memory ids are used (user buffers are not "
             "recycled)",
             PCL_FIFO_MAX_MEMORIES - PCL_PORTCHAN_MEM_FIRST_USER);
    local = ncclInvalidUsage;
  } else if (ptr != NULL && bytes > 0) {
    local = pcl_proxy_mem_reg(pc->proxy, mid, ptr, bytes, pc->dev >= 0, 0, &slots[pc->rank].exp[0]);
    registered = local == ncclSuccess;
  }
  slots[pc->rank].status = (int32_t)local;
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(pc->boot, slots, sizeof(*slots)), res, out);
  for (int r = 0; local == ncclSuccess && r < pc->nranks; r++)
    if (slots[r].status != ncclSuccess)
      local = (ncclResult_t)slots[r].status;
  /* A rank exposing nothing keeps no entry for mid, so it cannot address the peers' buffers
   * under it either (the proxy keeps remote descriptors in the local entry). */
  if (local == ncclSuccess && registered)
    local = set_remotes(pc, slots, 0, mid, mapped);
  res = agree(pc, local);
out:
  if (res != ncclSuccess && registered)
    pcl_proxy_mem_dereg(pc->proxy, mid);
  if (res == ncclSuccess)
    *id = mid;
  return res;
}

void pcl_portchan_buf_release(pcl_portchan_t *pc, uint32_t id) {
  if (pc == NULL || id < PCL_PORTCHAN_MEM_FIRST_USER || id >= pc->next_id)
    return;
  (void)pcl_proxy_mem_dereg(pc->proxy, id);
}
