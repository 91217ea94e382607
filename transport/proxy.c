/* SPDX-License-Identifier: MIT
 * The proxy thread: drains the FIFO in order, turns data/flag/sync triggers into transport puts,
 * signals and flushes, and publishes the tail (a SYNC trigger only once every earlier transfer
 * completed). Channels and connections are frozen once the thread runs; memory may be registered
 * and set while it runs (entries are published with release stores the thread acquire-loads). */
#define _GNU_SOURCE
#include "proxy.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "pcl_abort.h"
#include "alloc.h"
#include "log.h"
#include "param.h"
#include "pcl_check.h"

typedef struct {
  int used; /* published last (release); the proxy thread acquire-loads it */
  pcl_mem_local_t local;
  pcl_mem_remote_t *remote; /* per peer */
  uint8_t *remote_set;      /* per peer, published after remote[peer] (release) */
} mem_entry_t;

typedef struct {
  int used;
  pcl_proxy_channel_t desc;
  void *conn;
  const struct pcl_transport_ops *ops;
  uint64_t outbound; /* flags sent */
} chan_entry_t;

typedef struct {
  int peer;
  pcl_transport_kind_t kind;
  void *conn;
} conn_entry_t;

struct pcl_proxy {
  pcl_proxy_config_t cfg;
  char bus_id[32];
  pcl_fifo_t *fifo;
  pcl_transport_ctx_t ctx;
  int inited[PCL_TRANSPORT_COUNT];
  mem_entry_t mem[PCL_FIFO_MAX_MEMORIES];
  chan_entry_t chan[PCL_FIFO_MAX_CHANNELS];
  conn_entry_t *conns;
  int nconns, cap_conns;
  pthread_t thread;
  int running;
  atomic_int stop;
  _Atomic int error;
  _Atomic uint64_t consumed;
  int sync_pending;   /* the trigger at the tail is a SYNC whose flush is not done yet */
  atomic_int drain;   /* destroy asks: carry out what is posted, then say so in drained */
  atomic_int drained; /* the FIFO was empty and every connection flushed, after drain was set */
  volatile uint32_t own_abort; /* ctx.abort_flag when the configuration gives none */
  pthread_mutex_t fail_lock;   /* orders on_fail's call against its setting and clearing */
  pcl_proxy_fail_fn on_fail;
  void *on_fail_arg;
  int fail_told; /* on_fail has been called (once per proxy); under fail_lock */
  /* pcl_proxy_expect: a count of announced launches (the futex word of the thread's long naps)
   * and whether the thread is in, or about to enter, such a nap. The announcer bumps the count,
   * then reads dozing; the thread sets dozing, then re-reads the count (both sequentially
   * consistent): one of them sees the other, so an announcement is never slept through. */
  _Atomic uint32_t expect;
  atomic_int dozing;
  _Atomic uint64_t wakes; /* long naps an announcement cut short (statistics, tests) */
};

static int mem_used(const mem_entry_t *m) {
  return __atomic_load_n(&m->used, __ATOMIC_ACQUIRE);
}

static int mem_remote_set(const mem_entry_t *m, int peer) {
  return __atomic_load_n(&m->remote_set[peer], __ATOMIC_ACQUIRE);
}

static const pcl_mem_local_t *lookup(void *owner, uint32_t id) {
  pcl_proxy_t *p = owner;
  return (id < PCL_FIFO_MAX_MEMORIES && mem_used(&p->mem[id])) ? &p->mem[id].local : NULL;
}

static void fail(pcl_proxy_t *p, ncclResult_t res);

static void transport_failed(void *owner, ncclResult_t res) {
  fail((pcl_proxy_t *)owner, res);
}

ncclResult_t pcl_proxy_create(const pcl_proxy_config_t *cfg, pcl_proxy_t **out) {
  ncclResult_t res;
  pcl_proxy_t *p = NULL;
  PCL_CALLOC(p, 1, "proxy");
  if (p == NULL)
    return ncclSystemError;
  p->cfg = *cfg;
  pthread_mutex_init(&p->fail_lock, NULL);
  if (cfg->bus_id != NULL)
    snprintf(p->bus_id, sizeof(p->bus_id), "%s", cfg->bus_id);
  p->cfg.bus_id = p->bus_id;
  pcl_fifo_mem_t fm = cfg->fifo_mem;
  if (fm == PCL_FIFO_MEM_AUTO)
    fm = cfg->cuda_dev >= 0 ? PCL_FIFO_MEM_CUDA : PCL_FIFO_MEM_HOST;
  if (fm == PCL_FIFO_MEM_CUDA && cfg->cuda_dev >= 0 &&
      cudaSetDevice(cfg->cuda_dev) != cudaSuccess) {
    (void)cudaGetLastError();
    PCL_WARN(PCL_LOG_PORT, "proxy: cudaSetDevice(%d) failed", cfg->cuda_dev);
    pthread_mutex_destroy(&p->fail_lock);
    pcl_free(p);
    return ncclUnhandledCudaError;
  }
  res = pcl_fifo_create(cfg->fifo_size, fm, &p->fifo);
  if (res != ncclSuccess) {
    pthread_mutex_destroy(&p->fail_lock);
    pcl_free(p);
    return res;
  }
  p->ctx.rank = cfg->rank;
  p->ctx.nranks = cfg->nranks;
  p->ctx.cuda_dev = cfg->cuda_dev;
  p->ctx.bootstrap = cfg->bootstrap;
  /* Transport waits poll this flag: pcl_proxy_abort sets it, so an abort also ends a send
   * stalled on a peer that stopped reading. */
  p->ctx.abort_flag = cfg->abort_flag != NULL ? cfg->abort_flag : &p->own_abort;
  p->ctx.lookup = lookup;
  p->ctx.failed = transport_failed;
  p->ctx.owner = p;
  *out = p;
  return ncclSuccess;
}

pcl_fifo_device_t pcl_proxy_fifo(const pcl_proxy_t *p) {
  return pcl_fifo_device(p->fifo);
}
ncclResult_t pcl_proxy_error(const pcl_proxy_t *p) {
  return (ncclResult_t)atomic_load_explicit(&((pcl_proxy_t *)p)->error, memory_order_acquire);
}
uint64_t pcl_proxy_consumed(const pcl_proxy_t *p) {
  return atomic_load_explicit(&((pcl_proxy_t *)p)->consumed, memory_order_relaxed);
}

static ncclResult_t ensure_init(pcl_proxy_t *p, pcl_transport_kind_t kind) {
  if (p->inited[kind])
    return ncclSuccess;
  PCL_CHECK(pcl_transport_get(kind)->init(&p->ctx));
  p->inited[kind] = 1;
  return ncclSuccess;
}

static void *find_conn(pcl_proxy_t *p, int peer, pcl_transport_kind_t kind) {
  for (int i = 0; i < p->nconns; i++)
    if (p->conns[i].peer == peer && p->conns[i].kind == kind)
      return p->conns[i].conn;
  return NULL;
}

ncclResult_t pcl_proxy_connect(pcl_proxy_t *p, int peer, pcl_transport_kind_t kind) {
  if (p->running) {
    PCL_WARN(PCL_LOG_PORT, "proxy: connect after start");
    return ncclInvalidUsage;
  }
  if (peer < 0 || peer >= p->cfg.nranks || kind <= PCL_TRANSPORT_NONE ||
      kind >= PCL_TRANSPORT_COUNT) {
    PCL_WARN(PCL_LOG_PORT, "proxy: connect to peer %d over kind %d: out of range", peer, kind);
    return ncclInvalidArgument;
  }
  if (find_conn(p, peer, kind) != NULL)
    return ncclSuccess;
  PCL_CHECK(ensure_init(p, kind));
  if (p->nconns == p->cap_conns) {
    int ncap = p->cap_conns ? 2 * p->cap_conns : 8;
    conn_entry_t *nc =
        pcl_realloc(p->conns, (size_t)p->cap_conns, (size_t)ncap, sizeof(*nc), "proxy connections");
    if (nc == NULL)
      return ncclSystemError;
    p->conns = nc;
    p->cap_conns = ncap;
  }
  void *conn = NULL;
  PCL_CHECK(pcl_transport_get(kind)->connect(&p->ctx, peer, &conn));
  p->conns[p->nconns++] = (conn_entry_t){peer, kind, conn};
  PCL_INFO(PCL_LOG_PORT, "proxy rank %d: connected to rank %d over %s", p->cfg.rank, peer,
           pcl_transport_name(kind));
  return ncclSuccess;
}

ncclResult_t pcl_proxy_mem_reg(pcl_proxy_t *p, uint32_t id, void *base, size_t size, int is_device,
                               uint32_t kinds_mask, pcl_mem_remote_t *exp) {
  if (id >= PCL_FIFO_MAX_MEMORIES || base == NULL || p->mem[id].used) {
    PCL_WARN(PCL_LOG_PORT, "proxy: cannot register memory id %u (%s)", id,
             id >= PCL_FIFO_MAX_MEMORIES ? "id out of range"
             : base == NULL              ? "NULL base"
                                         : "id in use");
    return ncclInvalidUsage;
  }
  mem_entry_t *m = &p->mem[id];
  PCL_CALLOC(m->remote, (size_t)p->cfg.nranks, "proxy remote memory");
  PCL_CALLOC(m->remote_set, (size_t)p->cfg.nranks, "proxy remote flags");
  if (m->remote == NULL || m->remote_set == NULL)
    goto err_nomem;
  m->local = (pcl_mem_local_t){.id = id, .is_device = is_device, .base = base, .size = size};
  memset(exp, 0, sizeof(*exp));
  exp->addr = (uint64_t)(uintptr_t)base;
  exp->size = size;
  exp->mem_id = id;
  exp->is_device = (uint32_t)is_device;
  for (int k = 1; k < PCL_TRANSPORT_COUNT; k++) {
    int connected = 0;
    for (int i = 0; i < p->nconns; i++)
      connected |= p->conns[i].kind == (pcl_transport_kind_t)k;
    if (!connected && !(kinds_mask & (1u << k)))
      continue;
    /* A transport first initialised now would race with the running thread: not allowed. */
    ncclResult_t res =
        p->running && !p->inited[k] ? ncclInvalidUsage : ensure_init(p, (pcl_transport_kind_t)k);
    if (res == ncclSuccess)
      res = pcl_transport_get((pcl_transport_kind_t)k)->mem_reg(&p->ctx, &m->local, exp);
    if (res != ncclSuccess) {
      for (int j = 1; j < k; j++)
        if (m->local.reg[j] != NULL)
          pcl_transport_get((pcl_transport_kind_t)j)->mem_dereg(&p->ctx, &m->local);
      pcl_free(m->remote);
      pcl_free(m->remote_set);
      memset(m, 0, sizeof(*m));
      return res;
    }
  }
  __atomic_store_n(&m->used, 1, __ATOMIC_RELEASE);
  return ncclSuccess;
err_nomem:
  pcl_free(m->remote);
  pcl_free(m->remote_set);
  memset(m, 0, sizeof(*m));
  return ncclSystemError;
}

ncclResult_t pcl_proxy_mem_set_remote(pcl_proxy_t *p, uint32_t id, int peer,
                                      const pcl_mem_remote_t *remote) {
  if (id >= PCL_FIFO_MAX_MEMORIES || !p->mem[id].used || peer < 0 || peer >= p->cfg.nranks ||
      (p->running && p->mem[id].remote_set[peer])) {
    PCL_WARN(PCL_LOG_PORT, "proxy: cannot set remote memory id %u of peer %d%s", id, peer,
             p->running ? " (already set while the proxy runs)" : "");
    return ncclInvalidUsage;
  }
  p->mem[id].remote[peer] = *remote;
  __atomic_store_n(&p->mem[id].remote_set[peer], 1, __ATOMIC_RELEASE);
  return ncclSuccess;
}

int pcl_proxy_mem_remote(const pcl_proxy_t *p, uint32_t id, int peer, pcl_mem_remote_t *out) {
  memset(out, 0, sizeof(*out));
  if (id >= PCL_FIFO_MAX_MEMORIES || peer < 0 || peer >= p->cfg.nranks || !mem_used(&p->mem[id]) ||
      !mem_remote_set(&p->mem[id], peer))
    return 0;
  *out = p->mem[id].remote[peer];
  return 1;
}

static void mem_free_entry(pcl_proxy_t *p, mem_entry_t *m) {
  for (int k = 1; k < PCL_TRANSPORT_COUNT; k++)
    if (p->inited[k])
      pcl_transport_get((pcl_transport_kind_t)k)->mem_dereg(&p->ctx, &m->local);
  pcl_free(m->remote);
  pcl_free(m->remote_set);
  memset(m, 0, sizeof(*m));
}

ncclResult_t pcl_proxy_mem_dereg(pcl_proxy_t *p, uint32_t id) {
  if (id >= PCL_FIFO_MAX_MEMORIES || !p->mem[id].used) {
    PCL_WARN(PCL_LOG_PORT, "proxy: cannot deregister memory id %u (not registered)", id);
    return ncclInvalidUsage;
  }
  /* The caller guarantees no trigger naming id is in flight; a later one is refused as unknown. */
  __atomic_store_n(&p->mem[id].used, 0, __ATOMIC_RELEASE);
  mem_free_entry(p, &p->mem[id]);
  return ncclSuccess;
}

ncclResult_t pcl_proxy_channel_set(pcl_proxy_t *p, uint32_t id, const pcl_proxy_channel_t *ch) {
  void *conn = NULL;
  if (!p->running && id < PCL_FIFO_MAX_CHANNELS && ch->peer >= 0 && ch->peer < p->cfg.nranks &&
      ch->kind > PCL_TRANSPORT_NONE && ch->kind < PCL_TRANSPORT_COUNT)
    conn = find_conn(p, ch->peer, ch->kind);
  if (conn == NULL) {
    PCL_WARN(PCL_LOG_PORT, "proxy: cannot set channel %u (peer %d over %s: %s)", id, ch->peer,
             pcl_transport_name(ch->kind), p->running ? "proxy running" : "not connected");
    return ncclInvalidUsage;
  }
  chan_entry_t *c = &p->chan[id];
  c->used = 1;
  c->desc = *ch;
  c->conn = conn;
  c->ops = pcl_transport_get(ch->kind);
  c->outbound = 0;
  return ncclSuccess;
}

/* ---- the loop ---- */

static void fail(pcl_proxy_t *p, ncclResult_t res) {
  int expected = ncclSuccess;
  if (!atomic_compare_exchange_strong(&p->error, &expected, (int)res))
    return; /* not the first */
  pthread_mutex_lock(&p->fail_lock);
  if (p->on_fail != NULL && !p->fail_told) {
    p->fail_told = 1;
    p->on_fail(p->on_fail_arg, res);
  }
  pthread_mutex_unlock(&p->fail_lock);
}

void pcl_proxy_on_fail(pcl_proxy_t *p, pcl_proxy_fail_fn fn, void *arg) {
  if (p == NULL)
    return;
  pthread_mutex_lock(&p->fail_lock);
  p->on_fail = fn;
  p->on_fail_arg = arg;
  ncclResult_t res = (ncclResult_t)atomic_load_explicit(&p->error, memory_order_acquire);
  if (fn != NULL && res != ncclSuccess && !p->fail_told) {
    p->fail_told = 1;
    fn(arg, res);
  }
  pthread_mutex_unlock(&p->fail_lock);
}

static ncclResult_t handle(pcl_proxy_t *p, const pcl_fifo_trigger_t *t, int *is_sync) {
  uint32_t type = pcl_fifo_trig_type(t), cid = pcl_fifo_trig_channel(t);
  chan_entry_t *c = &p->chan[cid];
  *is_sync = 0;
  if (!c->used) {
    PCL_WARN(PCL_LOG_PORT, "proxy rank %d: trigger names unknown channel %u", p->cfg.rank, cid);
    return ncclInvalidUsage;
  }
  int peer = c->desc.peer;
  if (type & PCL_FIFO_TYPE_DATA) {
    uint32_t sid = pcl_fifo_trig_src_mem(t), did = pcl_fifo_trig_dst_mem(t);
    uint64_t so = pcl_fifo_trig_src_off(t), doff = pcl_fifo_trig_dst_off(t);
    uint64_t n = pcl_fifo_trig_size(t);
    mem_entry_t *s = &p->mem[sid], *d = &p->mem[did];
    if (!mem_used(s) || !mem_used(d) || !mem_remote_set(d, peer) || so + n > s->local.size ||
        doff + n > d->remote[peer].size) {
      PCL_WARN(PCL_LOG_PORT,
               "proxy rank %d: bad put on channel %u: src mem %u+%llu dst mem %u+%llu "
               "(peer %d) size %llu (unregistered or out of range)",
               p->cfg.rank, cid, sid, (unsigned long long)so, did, (unsigned long long)doff, peer,
               (unsigned long long)n);
      return ncclInvalidUsage;
    }
    PCL_CHECK(c->ops->put(c->conn, &s->local, so, &d->remote[peer], doff, n));
  }
  if (type & PCL_FIFO_TYPE_FLAG) {
    mem_entry_t *sm = &p->mem[c->desc.sem_mem_id < PCL_FIFO_MAX_MEMORIES ? c->desc.sem_mem_id : 0];
    if (!mem_used(sm) || !mem_remote_set(sm, peer) || c->desc.sem_off + 8 > sm->remote[peer].size) {
      PCL_WARN(PCL_LOG_PORT, "proxy rank %d: channel %u has no semaphore of peer %d", p->cfg.rank,
               cid, peer);
      return ncclInvalidUsage;
    }
    c->outbound++;
    PCL_CHECK(c->ops->signal(c->conn, &sm->remote[peer], c->desc.sem_off, c->outbound));
  }
  if (type & PCL_FIFO_TYPE_SYNC)
    *is_sync = 1;
  return ncclSuccess;
}

/* 1 when every connection reports its issued work complete. */
static int all_flushed(pcl_proxy_t *p) {
  for (int i = 0; i < p->nconns; i++) {
    int done = 0;
    ncclResult_t res = pcl_transport_get(p->conns[i].kind)->flush(p->conns[i].conn, &done);
    if (res != ncclSuccess) {
      fail(p, res);
      return 0;
    }
    if (!done)
      return 0;
  }
  return 1;
}

int pcl_proxy_poll_once(pcl_proxy_t *p) {
  if (atomic_load_explicit(&p->error, memory_order_relaxed) != ncclSuccess)
    return 0;
  for (int i = 0; i < p->nconns; i++) {
    ncclResult_t res = pcl_transport_get(p->conns[i].kind)->progress(p->conns[i].conn);
    if (res != ncclSuccess) {
      fail(p, res);
      return 0;
    }
  }
  if (p->sync_pending) {
    if (!all_flushed(p))
      return 0;
    p->sync_pending = 0;
    pcl_fifo_pop(p->fifo);
    atomic_fetch_add_explicit(&p->consumed, 1, memory_order_relaxed);
    return 1;
  }
  pcl_fifo_trigger_t t;
  if (!pcl_fifo_poll(p->fifo, &t))
    return 0;
  int is_sync = 0;
  ncclResult_t res = handle(p, &t, &is_sync);
  if (res != ncclSuccess) {
    fail(p, res);
    return 0;
  }
  if (is_sync && !all_flushed(p)) {
    p->sync_pending = 1;
    return 1;
  }
  pcl_fifo_pop(p->fifo);
  atomic_fetch_add_explicit(&p->consumed, 1, memory_order_relaxed);
  return 1;
}

static void pin_near_gpu(pcl_proxy_t *p) {
  cpu_set_t set;
  if (pcl_topo_pci_local_cpus(p->bus_id, &set, sizeof(set)) <= 0)
    return;
  int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (err != 0)
    PCL_INFO(PCL_LOG_PORT, "proxy: cannot pin to the CPUs of %s: %s", p->bus_id, strerror(err));
  else
    PCL_INFO(PCL_LOG_PORT, "proxy: pinned to the CPUs local to %s", p->bus_id);
}

static void doze(pcl_proxy_t *p, uint32_t seen, const struct timespec *len);

static void *proxy_main(void *arg) {
  pcl_proxy_t *p = arg;
  pcl_log_set_thread_rank(p->cfg.rank, p->cfg.cuda_dev);
  pin_near_gpu(p);
  if (p->cfg.cuda_dev >= 0) {
    if (cudaSetDevice(p->cfg.cuda_dev) != cudaSuccess) {
      (void)cudaGetLastError();
      PCL_WARN(PCL_LOG_PORT, "proxy: cudaSetDevice(%d) failed in the proxy thread",
               p->cfg.cuda_dev);
      fail(p, ncclUnhandledCudaError);
      return NULL;
    }
    /* The proxy's own copies must not be refused while the application captures a graph. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
  }
  /* The default 50 us timer slack would stretch every short back-off sleep below to ~50 us, the
   * latency of the first trigger after a quiet spell; 1 us keeps those sleeps short. */
  (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  unsigned idle = 0;
  uint32_t seen = atomic_load_explicit(&p->expect, memory_order_relaxed);
  const int64_t doze_us = pcl_param_proxy_doze_us();
  const struct timespec doze_len = {(time_t)(doze_us / 1000000), (long)(doze_us % 1000000) * 1000};
  while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
    if (pcl_abort_requested(p->ctx.abort_flag))
      break;
    if (pcl_proxy_poll_once(p)) {
      idle = 0;
      continue;
    }
    if (atomic_load_explicit(&p->error, memory_order_relaxed) != ncclSuccess) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL); /* stopped by an error: wait for destroy */
      continue;
    }
    /* Nothing at the tail and no SYNC pending: with drain set, no producer posts any more
     * (destroy's precondition), so once the connections report their work sent, it is done. */
    if (atomic_load_explicit(&p->drain, memory_order_acquire) && !p->sync_pending && all_flushed(p))
      atomic_store_explicit(&p->drained, 1, memory_order_release);
    /* A launch announced since the last look: its triggers come within microseconds, so poll
     * hot again. */
    uint32_t e = atomic_load_explicit(&p->expect, memory_order_relaxed);
    if (e != seen) {
      seen = e;
      idle = 0;
    }
    /* Busy-poll while work is likely; back off when idle so a 2-core host is not starved: 2 us
     * naps for the first ~0.2 s of quiet, then PLANCCL_PROXY_DOZE_US ones (50 us), which an
     * announced launch ends. */
    if (++idle > 65536) {
      doze(p, seen, &doze_len);
    } else if (idle > 4096) {
      struct timespec ts = {0, 2000};
      nanosleep(&ts, NULL);
    } else if ((idle & 63) == 0) {
      sched_yield();
    }
  }
  return NULL;
}

/* A long nap on the futex word `expect`: up to PLANCCL_PROXY_DOZE_US, or until
 * pcl_proxy_expect bumps the word past `seen` (at once if it already did). Triggers themselves
 * cannot end it (the GPU writes the FIFO), hence the bound. */
static void doze(pcl_proxy_t *p, uint32_t seen, const struct timespec *len) {
  atomic_store(&p->dozing, 1);
  if (atomic_load(&p->expect) == seen)
    (void)syscall(SYS_futex, &p->expect, FUTEX_WAIT_PRIVATE, seen, len, NULL, 0);
  if (atomic_load_explicit(&p->expect, memory_order_relaxed) != seen)
    atomic_fetch_add_explicit(&p->wakes, 1, memory_order_relaxed);
  atomic_store_explicit(&p->dozing, 0, memory_order_relaxed);
}

void pcl_proxy_expect(pcl_proxy_t *p) {
  if (p == NULL)
    return;
  atomic_fetch_add(&p->expect, 1);
  /* Only a dozing thread costs a system call: a launch right after others finds it polling. */
  if (atomic_load(&p->dozing))
    (void)syscall(SYS_futex, &p->expect, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

uint64_t pcl_proxy_wakes(const pcl_proxy_t *p) {
  return atomic_load_explicit(&((pcl_proxy_t *)p)->wakes, memory_order_relaxed);
}

int pcl_proxy_dozing(const pcl_proxy_t *p) {
  return atomic_load_explicit(&((pcl_proxy_t *)p)->dozing, memory_order_relaxed);
}

ncclResult_t pcl_proxy_start(pcl_proxy_t *p) {
  if (p->running)
    return ncclSuccess;
  int err = pthread_create(&p->thread, NULL, proxy_main, p);
  if (err != 0) {
    PCL_WARN(PCL_LOG_PORT, "proxy: cannot start the proxy thread: %s", strerror(err));
    return ncclSystemError;
  }
  p->running = 1;
  return ncclSuccess;
}

/* The last kernel's triggers may still sit in the FIFO, or its puts in a socket, when the
 * communicator is destroyed: a peer still waiting for that signal would wait forever. So the
 * thread carries out everything posted and flushes before it stops, bounded by an abort, an
 * error, or PLANCCL_BOOTSTRAP_TIMEOUT_S. */
static void drain(pcl_proxy_t *p) {
  struct timespec t0, now;
  const long limit_s = (long)pcl_param_bootstrap_timeout_s();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  atomic_store_explicit(&p->drain, 1, memory_order_release);
  for (;;) {
    if (atomic_load_explicit(&p->drained, memory_order_acquire))
      return;
    if (atomic_load_explicit(&p->error, memory_order_acquire) != ncclSuccess ||
        pcl_abort_requested(p->ctx.abort_flag))
      return; /* reported already, or the caller gave up on the peers */
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > limit_s) {
      PCL_WARN(PCL_LOG_PORT,
               "proxy rank %d: its posted transfers were not done %ld s into destroy "
               "(%llu triggers taken): stopping without them",
               p->cfg.rank, limit_s, (unsigned long long)pcl_proxy_consumed(p));
      return;
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

void pcl_proxy_abort(pcl_proxy_t *p) {
  if (p == NULL)
    return;
  pcl_abort_set(p->ctx.abort_flag);
  pcl_proxy_expect(p); /* a dozing thread sees the abort now, not at the end of its nap */
}

void pcl_proxy_destroy(pcl_proxy_t *p) {
  if (p == NULL)
    return;
  if (p->running) {
    pcl_proxy_expect(p); /* the drain and the stop below are not left to the end of a nap */
    drain(p);
    atomic_store(&p->stop, 1);
    pcl_proxy_expect(p);
    pthread_join(p->thread, NULL);
    p->running = 0;
  }
  for (int i = 0; i < p->nconns; i++)
    pcl_transport_get(p->conns[i].kind)->disconnect(&p->ctx, p->conns[i].conn);
  for (uint32_t id = 0; id < PCL_FIFO_MAX_MEMORIES; id++)
    if (p->mem[id].used)
      mem_free_entry(p, &p->mem[id]);
  for (int k = 1; k < PCL_TRANSPORT_COUNT; k++)
    if (p->inited[k])
      pcl_transport_get((pcl_transport_kind_t)k)->fini(&p->ctx);
  pcl_free(p->conns);
  pcl_fifo_destroy(p->fifo);
  pthread_mutex_destroy(&p->fail_lock);
  pcl_free(p);
}
