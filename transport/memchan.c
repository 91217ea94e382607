/* SPDX-License-Identifier: MIT
 * Memory channels: the collective exchange of memory export descriptors over the bootstrap, the
 * per-peer device semaphore counters, and the host view of each (peer, channel). */
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "log.h"
#include "memchan.h"
#include "pcl_check.h"

/* One rank's slot in an exchange: its status so far and its descriptor (magic 0 = nothing). */
typedef struct {
  int32_t status; /* ncclResult_t of this rank's local work */
  uint32_t reserved;
  pcl_mem_desc_t desc;
} exchange_slot_t;

struct pcl_memchan_buf {
  pcl_memchan_t *mc;
  pcl_memchan_buf_t *next; /* the communicator's list of live buffers */
  pcl_mem_reg_t *reg;
  pcl_mem_import_t **imports; /* [nranks] */
  uint64_t *remote;           /* [nranks] */
  uint64_t *remote_bytes;     /* [nranks] */
};

struct pcl_memchan {
  pcl_bootstrap_t *boot;
  int rank, nranks, dev, nchannels;
  uint8_t *connect;           /* [nranks] */
  pcl_mem_alloc_t *sems;      /* [0, n): inbound counters; [n, 2n): expected; n = nranks*nch */
  pcl_memchan_buf_t *sem_buf; /* the counters, exchanged */
  pcl_memchan_buf_t *scratch; /* the scratch buffer, exchanged */
  pcl_memchan_buf_t *user;    /* list of pcl_memchan_buf_reg buffers */
};

static void buf_free(pcl_memchan_buf_t *buf) {
  if (buf == NULL)
    return;
  for (int p = 0; buf->imports != NULL && p < buf->mc->nranks; p++)
    pcl_mem_import_close(buf->imports[p]);
  pcl_mem_dereg(buf->reg);
  pcl_free(buf->imports);
  pcl_free(buf->remote);
  pcl_free(buf->remote_bytes);
  pcl_free(buf);
}

/* Collective: register locally, all-gather the slots, import connected peers, all-gather the
 * outcome. A local failure still takes part in both all-gathers, so no rank is left waiting. */
static ncclResult_t exchange(pcl_memchan_t *mc, ncclResult_t pre, void *ptr, size_t bytes,
                             pcl_memchan_buf_t **out) {
  ncclResult_t res = ncclSuccess, local = pre;
  exchange_slot_t *slots = NULL;
  int32_t *status = NULL;
  pcl_memchan_buf_t *buf = NULL;
  const int n = mc->nranks, me = mc->rank;

  slots = pcl_calloc((size_t)n, sizeof(*slots), "memchan exchange slots");
  status = pcl_calloc((size_t)n, sizeof(*status), "memchan exchange status");
  PCL_CALLOC(buf, 1, "memchan buffer");
  if (slots == NULL || status == NULL || buf == NULL) {
    /* Cannot take part meaningfully without the slot array: fail locally; peers time out in the
     * bootstrap, which names this rank. Out of host memory at init is rare enough. */
    res = ncclSystemError;
    goto out;
  }
  buf->mc = mc;
  buf->imports = pcl_calloc((size_t)n, sizeof(*buf->imports), "memchan imports");
  buf->remote = pcl_calloc((size_t)n, sizeof(*buf->remote), "memchan remote bases");
  buf->remote_bytes = pcl_calloc((size_t)n, sizeof(*buf->remote_bytes), "memchan remote sizes");
  if (local == ncclSuccess &&
      (buf->imports == NULL || buf->remote == NULL || buf->remote_bytes == NULL))
    local = ncclSystemError;
  if (local == ncclSuccess && ptr != NULL && bytes > 0) {
    local = pcl_mem_reg(ptr, bytes, &buf->reg);
    if (local == ncclSuccess)
      slots[me].desc = *pcl_mem_reg_desc(buf->reg);
  }
  slots[me].status = (int32_t)local;
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(mc->boot, slots, sizeof(*slots)), res, out);

  for (int p = 0; p < n && local == ncclSuccess; p++) {
    if (p == me || !mc->connect[p])
      continue;
    if (slots[p].status != ncclSuccess) {
      local = (ncclResult_t)slots[p].status; /* that rank already logged why */
      PCL_INFO(PCL_LOG_IPC, "memchan: rank %d failed to register (%d)", p, slots[p].status);
      break;
    }
    if (slots[p].desc.magic == 0)
      continue; /* the peer exposes nothing here */
    local = pcl_mem_import(&slots[p].desc, mc->dev, &buf->imports[p]);
    if (local != ncclSuccess) {
      PCL_WARN(PCL_LOG_IPC, "memchan: rank %d cannot import %s memory of rank %d", me,
               pcl_mem_kind_name(slots[p].desc.kind), p);
      break;
    }
    buf->remote[p] = (uint64_t)(uintptr_t)pcl_mem_import_ptr(buf->imports[p]);
    buf->remote_bytes[p] = slots[p].desc.bytes;
  }
  status[me] = (int32_t)local;
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(mc->boot, status, sizeof(*status)), res, out);
  for (int p = 0; p < n; p++) {
    if (status[p] != ncclSuccess) {
      if (p != me)
        PCL_INFO(PCL_LOG_IPC, "memchan: rank %d failed its part (%d)", p, status[p]);
      res = local != ncclSuccess ? local : (ncclResult_t)status[p];
      goto out;
    }
  }
  *out = buf;
  buf = NULL;
out:
  buf_free(buf);
  pcl_free(slots);
  pcl_free(status);
  return res;
}

ncclResult_t pcl_memchan_create(pcl_bootstrap_t *b, const pcl_memchan_config_t *cfg,
                                pcl_memchan_t **out) {
  ncclResult_t res = ncclSuccess;
  pcl_memchan_t *mc = NULL;
  if (b == NULL || cfg == NULL || out == NULL || cfg->nchannels < 1 ||
      cfg->nchannels > PCL_MEMCHAN_MAX_CHANNELS || cfg->cuda_dev < 0 ||
      (cfg->scratch == NULL) != (cfg->scratch_bytes == 0)) {
    PCL_WARN(PCL_LOG_IPC, "pcl_memchan_create: invalid configuration");
    return ncclInvalidArgument;
  }
  PCL_CALLOC(mc, 1, "memory channels");
  if (mc == NULL)
    return ncclSystemError;
  mc->boot = b;
  mc->rank = pcl_bootstrap_rank(b);
  mc->nranks = pcl_bootstrap_nranks(b);
  mc->dev = cfg->cuda_dev;
  mc->nchannels = cfg->nchannels;
  mc->connect = pcl_calloc((size_t)mc->nranks, 1, "memchan peers");
  PCL_PTR_CHECK_GOTO(mc->connect, "memchan peers", res, fail);
  for (int p = 0; p < mc->nranks; p++)
    mc->connect[p] = p != mc->rank && (cfg->connect == NULL || cfg->connect[p]);

  /* The counters are zeroed (synchronously) before their descriptor leaves this rank, so no
   * peer can ever observe a stale value. A failed allocation still joins the exchange below. */
  size_t n = (size_t)mc->nranks * (size_t)mc->nchannels;
  ncclResult_t ares = pcl_mem_alloc(mc->dev, 2 * n * sizeof(uint64_t), cfg->sem_kind, &mc->sems);
  if (ares != ncclSuccess)
    mc->sems = NULL;
  PCL_CHECK_GOTO(exchange(mc, ares, mc->sems ? mc->sems->ptr : NULL,
                          mc->sems ? n * sizeof(uint64_t) : 0, &mc->sem_buf),
                 res, fail);
  for (int p = 0; p < mc->nranks; p++) {
    if (mc->connect[p] && mc->sem_buf->remote[p] == 0) {
      PCL_WARN(PCL_LOG_IPC,
               "memchan: rank %d got no semaphores from rank %d (asymmetric connect "
               "mask?)",
               mc->rank, p);
      res = ncclInvalidUsage;
      goto fail;
    }
  }
  PCL_CHECK_GOTO(exchange(mc, ncclSuccess, cfg->scratch, cfg->scratch_bytes, &mc->scratch), res,
                 fail);
  PCL_INFO(PCL_LOG_IPC, "memchan: rank %d/%d dev %d: %d channels per peer, scratch %zu bytes",
           mc->rank, mc->nranks, mc->dev, mc->nchannels, cfg->scratch_bytes);
  *out = mc;
  return ncclSuccess;
fail:
  pcl_memchan_destroy(mc);
  return res;
}

void pcl_memchan_destroy(pcl_memchan_t *mc) {
  if (mc == NULL)
    return;
  if (mc->user != NULL) {
    PCL_WARN(PCL_LOG_IPC, "memchan destroyed with registered buffers left; releasing them");
    while (mc->user != NULL)
      pcl_memchan_buf_release(mc->user);
  }
  buf_free(mc->scratch);
  buf_free(mc->sem_buf);
  pcl_mem_free(mc->sems);
  pcl_free(mc->connect);
  pcl_free(mc);
}

int pcl_memchan_connected(const pcl_memchan_t *mc, int peer) {
  return mc != NULL && peer >= 0 && peer < mc->nranks && mc->connect[peer];
}

int pcl_memchan_nchannels(const pcl_memchan_t *mc) {
  return mc->nchannels;
}

ncclResult_t pcl_memchan_info(const pcl_memchan_t *mc, int peer, int channel,
                              pcl_memchan_info_t *out) {
  if (!pcl_memchan_connected(mc, peer) || channel < 0 || channel >= mc->nchannels || !out) {
    PCL_WARN(PCL_LOG_IPC, "pcl_memchan_info: no channel %d to rank %d", channel, peer);
    return ncclInvalidArgument;
  }
  const uint64_t n = (uint64_t)mc->nranks * (uint64_t)mc->nchannels;
  const uint64_t base = (uint64_t)(uintptr_t)mc->sems->ptr;
  /* Slot (r, c) of a rank's inbound array holds what rank r signalled on channel c. */
  out->local_inbound = base + ((uint64_t)peer * mc->nchannels + channel) * sizeof(uint64_t);
  out->local_expected = base + (n + (uint64_t)peer * mc->nchannels + channel) * sizeof(uint64_t);
  out->remote_inbound =
      mc->sem_buf->remote[peer] + ((uint64_t)mc->rank * mc->nchannels + channel) * sizeof(uint64_t);
  out->remote_scratch = mc->scratch->remote[peer];
  out->remote_scratch_bytes = mc->scratch->remote_bytes[peer];
  return ncclSuccess;
}

ncclResult_t pcl_memchan_buf_reg(pcl_memchan_t *mc, void *ptr, size_t bytes,
                                 pcl_memchan_buf_t **out) {
  pcl_memchan_buf_t *buf = NULL;
  if (mc == NULL || out == NULL) {
    PCL_WARN(PCL_LOG_IPC, "pcl_memchan_buf_reg: invalid argument");
    return ncclInvalidArgument;
  }
  if (ptr == NULL)
    bytes = 0;
  PCL_CHECK(exchange(mc, ncclSuccess, ptr, bytes, &buf));
  buf->next = mc->user;
  mc->user = buf;
  *out = buf;
  return ncclSuccess;
}

uint64_t pcl_memchan_buf_remote(const pcl_memchan_buf_t *buf, int peer, uint64_t *bytes) {
  if (buf == NULL || !pcl_memchan_connected(buf->mc, peer)) {
    if (bytes)
      *bytes = 0;
    return 0;
  }
  if (bytes)
    *bytes = buf->remote_bytes[peer];
  return buf->remote[peer];
}

void pcl_memchan_buf_release(pcl_memchan_buf_t *buf) {
  if (buf == NULL)
    return;
  for (pcl_memchan_buf_t **pp = &buf->mc->user; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == buf) {
      *pp = buf->next;
      break;
    }
  }
  buf_free(buf);
}
