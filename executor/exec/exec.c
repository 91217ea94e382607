/* SPDX-License-Identifier: MIT
 * The executor context of one communicator: device state, programs cached per (plan, in bytes,
 * out bytes, root relabelling, registered buffers), binding to memory channels, and the per-call
 * launch. After the first call of a shape the call path does no allocation, file access or host
 * synchronisation. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "alloc.h"
#include "cuda_check.h"
#include "exec.h"
#include "kernels.h"
#include "log.h"
#include "param.h"
#include "memchan.h"
#include "portchan.h"
#include "exec_int.h"
#include "exec_progs.h"

/* The host-mapped words: error, abort, then the kernels' hang report (kernel_abi.h). */
#define WORDS_BYTES (PCL_KHANG_OFFSET + sizeof(pcl_khang_t))
PCL_KABI_ASSERT(PCL_KHANG_OFFSET >= 2 * sizeof(uint32_t), "hang report after the words");

struct pcl_exec_ctx {
  pcl_exec_config_t cfg;
  pcl_kstate_t *d_state;
  uint32_t *h_words; /* mapped pinned: [0] error, [1] abort; the hang report at PCL_KHANG_OFFSET */
  int hang_logged;   /* the report was logged (pcl_exec_async_error; atomic: any thread) */
  uint32_t *d_words;
  cudaStream_t side;
  pcl_kprof_t *d_prof; /* PCL_KPROF builds only, else NULL */
  uint64_t half;       /* this rank's constant scratch half */
  uint8_t launch;      /* PCL_KLAUNCH_* of every launch (PLANCCL_PDL), fixed at creation */
  /* Changed by the communicator's calling thread only; progs_lock orders those changes with the
   * hang report, which ncclCommGetAsyncError may build from a watchdog thread. */
  pthread_mutex_t progs_lock;
  pcl_exec_progs_t progs;
  /* pcl_exec_order: the stream of the last eager launch, and the event that hands the order on
   * to another stream; once a second stream was seen (multi), recorded after every eager launch
   * (captured: the launch at hand is captured, nothing to record). */
  cudaStream_t last_stream;
  int have_last, multi, captured;
  cudaEvent_t order_ev;
  /* Recorded on `side` after each build's copies; built_pending until a launch waited for it. */
  cudaEvent_t built_ev;
  int built_pending;
};

ncclResult_t pcl_exec_ctx_create(const pcl_exec_config_t *cfg, pcl_exec_ctx_t **out) {
  ncclResult_t res = ncclSuccess;
  int prev = -1;
  pcl_exec_ctx_t *c = NULL;
  PCL_CUDA_CHECK(cudaGetDevice(&prev));
  PCL_CALLOC(c, 1, "exec ctx");
  if (c == NULL)
    return ncclSystemError;
  c->cfg = *cfg;
  pthread_mutex_init(&c->progs_lock, NULL);
  c->half = (cfg->scratch_bytes / 2) & ~(uint64_t)255;
  c->launch = pcl_kernels_pdl() ? PCL_KLAUNCH_PDL : 0;
  PCL_CUDA_CHECK_GOTO(cudaSetDevice(cfg->cuda_dev), res, err_free);
  PCL_CHECK_GOTO(pcl_kernels_load_all(), res, err_dev);
  PCL_CUDA_CHECK_GOTO(cudaMalloc((void **)&c->d_state, sizeof(pcl_kstate_t)), res, err_dev);
  PCL_CUDA_CHECK_GOTO(cudaMemset(c->d_state, 0, sizeof(pcl_kstate_t)), res, err_state);
  if (cfg->first_flag != 0) {
    uint64_t f[PCL_KABI_FLAG_SLOTS];
    for (int j = 0; j < PCL_KABI_FLAG_SLOTS; j++)
      f[j] = cfg->first_flag;
    PCL_CUDA_CHECK_GOTO(cudaMemcpy(c->d_state->flag, f, sizeof(f), cudaMemcpyHostToDevice), res,
                        err_state);
  }
  PCL_CUDA_CHECK_GOTO(cudaHostAlloc((void **)&c->h_words, WORDS_BYTES, cudaHostAllocMapped), res,
                      err_state);
  memset(c->h_words, 0, WORDS_BYTES);
  PCL_CUDA_CHECK_GOTO(cudaHostGetDevicePointer((void **)&c->d_words, c->h_words, 0), res,
                      err_words);
  PCL_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking), res, err_words);
  PCL_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&c->order_ev, cudaEventDisableTiming), res,
                      err_stream);
  PCL_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&c->built_ev, cudaEventDisableTiming), res,
                      err_stream);
  PCL_CHECK_GOTO(pcl_progs_init(&c->progs), res, err_stream);
#ifdef PCL_KPROF
  PCL_CUDA_CHECK_GOTO(cudaMalloc((void **)&c->d_prof, sizeof(pcl_kprof_t)), res, err_stream);
  PCL_CUDA_CHECK_GOTO(cudaMemset(c->d_prof, 0, sizeof(pcl_kprof_t)), res, err_stream);
#endif
  PCL_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), res, err_stream);
  cudaSetDevice(prev);
  *out = c;
  return ncclSuccess;
err_stream:
  pcl_progs_fini(&c->progs, cfg->rank);
  cudaFree(c->d_prof);
  if (c->order_ev != NULL)
    cudaEventDestroy(c->order_ev);
  if (c->built_ev != NULL)
    cudaEventDestroy(c->built_ev);
  cudaStreamDestroy(c->side);
err_words:
  cudaFreeHost(c->h_words);
err_state:
  cudaFree(c->d_state);
err_dev:
  cudaSetDevice(prev);
err_free:
  pthread_mutex_destroy(&c->progs_lock);
  pcl_free(c);
  return res;
}

void pcl_exec_ctx_destroy(pcl_exec_ctx_t *c) {
  if (c == NULL)
    return;
  int prev = -1;
  cudaGetDevice(&prev);
  cudaSetDevice(c->cfg.cuda_dev);
  pcl_progs_fini(&c->progs, c->cfg.rank);
  cudaFree(c->d_prof);
  cudaEventDestroy(c->order_ev);
  cudaEventDestroy(c->built_ev);
  cudaStreamDestroy(c->side);
  cudaFreeHost(c->h_words);
  cudaFree(c->d_state);
  if (prev >= 0)
    cudaSetDevice(prev);
  pthread_mutex_destroy(&c->progs_lock);
  pcl_free(c);
}

typedef struct {
  const pcl_plan_t *plan;
  const pcl_exec_userbuf_t *ub;
} drop_key_t;

static int drop_match(const prog_t *p, const void *arg) {
  const drop_key_t *k = arg;
  return k->plan != NULL ? p->plan == k->plan
                         : p->ub == k->ub && (p->shape.remote_io || p->shape.port_io);
}

/* Drops the programs of `plan` (when not NULL) or those bound to the registration `ub`. */
static void drop_progs(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_userbuf_t *ub) {
  const drop_key_t k = {plan, ub};
  pthread_mutex_lock(&c->progs_lock);
  pcl_progs_drop(&c->progs, drop_match, &k);
  pthread_mutex_unlock(&c->progs_lock);
}

const pcl_exec_config_t *pcl_exec_ctx_cfg(const pcl_exec_ctx_t *c) {
  return &c->cfg;
}

void pcl_exec_drop_userbuf(pcl_exec_ctx_t *c, const pcl_exec_userbuf_t *ub) {
  drop_progs(c, NULL, ub);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- binding ---- */

static uint64_t peer_scratch(const pcl_exec_ctx_t *c, int peer, uint64_t *half) {
  pcl_memchan_info_t info;
  *half = 0;
  if (c->cfg.memchan != NULL && pcl_memchan_connected(c->cfg.memchan, peer) &&
      pcl_memchan_info(c->cfg.memchan, peer, 0, &info) == ncclSuccess) {
    *half = (info.remote_scratch_bytes / 2) & ~(uint64_t)255;
    return info.remote_scratch;
  }
  /* A peer on another host has no mapping, but port puts into its double-buffered scratch still
   * add its odd half on odd calls: take its size from what it exported to the proxy. */
  if (c->cfg.portchan != NULL)
    *half = (pcl_portchan_remote_bytes(c->cfg.portchan, PCL_PORTCHAN_MEM_SCRATCH, peer) / 2) &
            ~(uint64_t)255;
  return 0;
}

static ncclResult_t bind_ports(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const prog_t *p,
                               const pcl_exec_userbuf_t *ub, pcl_kportchan_t *port) {
  const pcl_plan_gpu_t *g = &plan->gpus[p->vrank];
  const pcl_plan_channel_t *ch = g->channels[PCL_PLAN_CHAN_PORT];
  for (int i = 0; i < g->n_channels[PCL_PLAN_CHAN_PORT]; i++) {
    int k = pcl_plan_chan_index(ch, i);
    int peer = pcl_exec_prank(ch[i].peer, p->shift, plan->n_gpus);
    pcl_portchan_info_t info;
    if (c->cfg.portchan == NULL ||
        pcl_portchan_info(c->cfg.portchan, peer, k, &info) != ncclSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "plan %s: no port channel %d to rank %d (%d per peer)", plan->name, k,
               peer, c->cfg.portchan ? pcl_portchan_nchannels(c->cfg.portchan) : 0);
      return ncclInvalidUsage;
    }
    port[i].fifo = info.fifo;
    port[i].local_inbound = info.local_inbound;
    port[i].local_expected = info.local_expected;
    port[i].chan_id = info.chan_id;
    port[i].src_mem[PCL_KBUF_INPUT] = pcl_exec_userbuf_port_id(ub, PCL_PLAN_BUF_INPUT);
    port[i].src_mem[PCL_KBUF_OUTPUT] = pcl_exec_userbuf_port_id(ub, PCL_PLAN_BUF_OUTPUT);
    port[i].src_mem[PCL_KBUF_SCRATCH] =
        c->cfg.scratch != NULL ? PCL_PORTCHAN_MEM_SCRATCH : PCL_KABI_NO_MEM;
  }
  return ncclSuccess;
}

/* Peers are bound by communicator rank: the plan's rank q is rank prank(q, shift). */
static ncclResult_t bind_tables(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const prog_t *p,
                                const pcl_exec_userbuf_t *ub, pcl_kmemchan_t *mem,
                                pcl_kremote_t *rb) {
  const pcl_plan_gpu_t *g = &plan->gpus[p->vrank];
  const pcl_plan_channel_t *ch = g->channels[PCL_PLAN_CHAN_MEMORY];
  for (int i = 0; i < g->n_channels[PCL_PLAN_CHAN_MEMORY]; i++) {
    int k = pcl_plan_chan_index(ch, i);
    int peer = pcl_exec_prank(ch[i].peer, p->shift, plan->n_gpus);
    pcl_memchan_info_t info;
    if (c->cfg.memchan == NULL || pcl_memchan_info(c->cfg.memchan, peer, k, &info) != ncclSuccess) {
      PCL_WARN(PCL_LOG_EXEC, "plan %s: no memory channel %d to rank %d (memchan has %d per peer)",
               plan->name, k, peer, c->cfg.memchan ? pcl_memchan_nchannels(c->cfg.memchan) : 0);
      return ncclInvalidUsage;
    }
    mem[i].remote_inbound = info.remote_inbound;
    mem[i].local_inbound = info.local_inbound;
    mem[i].local_expected = info.local_expected;
    mem[i].remote_base[PCL_KBUF_SCRATCH] = info.remote_scratch;
    mem[i].remote_base[PCL_KBUF_INPUT] = pcl_exec_userbuf_peer(ub, peer, PCL_PLAN_BUF_INPUT);
    mem[i].remote_base[PCL_KBUF_OUTPUT] = pcl_exec_userbuf_peer(ub, peer, PCL_PLAN_BUF_OUTPUT);
  }
  for (int i = 0; i < g->n_rbufs; i++) {
    const pcl_plan_rbuf_t *r = &g->rbufs[i];
    int peer = pcl_exec_prank(r->rank, p->shift, plan->n_gpus);
    uint64_t half = 0;
    rb[i].mem_id = PCL_KABI_NO_MEM;
    rb[i].kind = r->type;
    if (r->type == PCL_PLAN_BUF_SCRATCH) {
      rb[i].ptr = peer_scratch(c, peer, &half);
      rb[i].odd_half = plan->use_double_scratch_buffer ? half : 0;
    } else {
      rb[i].ptr = pcl_exec_userbuf_peer(ub, peer, r->type);
    }
    /* Memory ids are assigned alike on every rank, so the peer's buffer has my id for it. */
    if (r->access & (1u << PCL_PLAN_CHAN_PORT))
      rb[i].mem_id = r->type == PCL_PLAN_BUF_SCRATCH ? PCL_PORTCHAN_MEM_SCRATCH
                                                     : pcl_exec_userbuf_port_id(ub, r->type);
    if (rb[i].ptr == 0 && (r->access & (1u << PCL_PLAN_CHAN_MEMORY))) {
      PCL_WARN(PCL_LOG_EXEC, "plan %s: rank %d's %s buffer is not mapped here%s", plan->name, peer,
               pcl_plan_buf_name(r->type),
               r->type == PCL_PLAN_BUF_SCRATCH ? "" : " (zero-copy plans need registered buffers)");
      return ncclInvalidUsage;
    }
  }
  return ncclSuccess;
}

/* ---- co-residency ---- */

int pcl_exec_coresident(pcl_exec_ctx_t *c, const pcl_plan_t *plan, char *why, size_t why_len) {
  int prev = -1, fit;
  int k = c->cfg.dev_ranks > 0 ? c->cfg.dev_ranks : 1;
  cudaGetDevice(&prev);
  if (prev != c->cfg.cuda_dev)
    cudaSetDevice(c->cfg.cuda_dev);
  fit = pcl_kernels_resident_blocks(plan->num_threads_per_block);
  if (prev != c->cfg.cuda_dev)
    cudaSetDevice(prev);
  if ((int64_t)k * plan->max_blocks <= (int64_t)fit)
    return 1;
  if (why != NULL)
    snprintf(why, why_len,
             "plan %s: %d rank%s share a GPU, each launching %d blocks of %d "
             "threads (%lld in all), but only %d such blocks fit on the device at once; the "
             "spinning blocks could not all run",
             plan->name, k, k > 1 ? "s" : "", plan->max_blocks, plan->num_threads_per_block,
             (long long)k * plan->max_blocks, fit);
  return 0;
}

/* ---- programs ---- */

static int prog_check(const pcl_exec_ctx_t *c, const pcl_plan_t *plan, const prog_t *p,
                      const pcl_exec_args_t *a, int *pkt, int quiet) {
  const char *why = NULL;
  size_t es = pcl_kernels_dtype_bytes(a->dtype);
  int ll16 = !a->force_ll8 && (p->shape.pkt_or & 7) == 0;
  if (!p->resident)
    why = "its blocks and those of the ranks sharing the GPU cannot all be resident";
  else if (es == 0)
    why = "dtype not supported";
  else if (p->shape.has_reduce && !pcl_kernels_redop_supported(a->dtype, a->op))
    why = "reduction op not supported";
  else if (p->shape.has_reduce && !pcl_plan_accepts_op(plan, (int)a->op))
    why = "the plan names another reduce_op";
  else if (p->shape.has_reduce && es > 4 && (p->shape.red_or % es) != 0)
    why = "reduce ranges split elements";
  else if ((p->shape.pkt_or & 3) != 0)
    why = "packet ranges not 4-byte aligned";
  else if (!ll16 && p->shape.has_pkt_reduce &&
           !pcl_kernels_pkt_reduce_supported(a->dtype, PCL_KPKT_LL8))
    why = "LL8 packets cannot carry 8-byte elements";
  else if (p->shape.has_port && c->cfg.portchan == NULL)
    why = "no port channels on this communicator";
  else if (p->shape.has_port && pcl_portchan_error(c->cfg.portchan) != ncclSuccess)
    why = "the port-channel proxy failed";
  else if (p->shape.remote_io && a->ub == NULL)
    why = "zero-copy plan without registered buffers";
  else if (p->shape.port_io && a->ub == NULL)
    why = "port channel reads or writes a user buffer that is not registered";
  else if (p->shape.has_port && a->ub != NULL && a->ub->win[0] != NULL)
    why = "port-channel plans run on exact registrations, not on window views";
  else if (plan->use_double_scratch_buffer ? p->shape.scratch_half > c->half
                                           : p->shape.scratch_half > c->cfg.scratch_bytes)
    why = "scratch too small";
  if (why != NULL) {
    if (!quiet)
      PCL_WARN(PCL_LOG_EXEC, "plan %s cannot run %llu/%llu bytes here: %s", plan->name,
               (unsigned long long)a->in_bytes, (unsigned long long)a->out_bytes, why);
    return 0;
  }
  *pkt = ll16 ? PCL_KPKT_LL16 : PCL_KPKT_LL8;
  return 1;
}

/* What picks the EW kernel's form at launch (pcl_kernels_ew_form): the reduction of every block
 * that reduces (0 when they differ: one kernel runs them all) and the OR of the offsets. */
static int ew_redop_add(prog_t *p, int nterm, uint8_t redop) {
  if (nterm < 2)
    return 1; /* a copy: no reduction */
  if (p->ew_redop >= 0 && p->ew_redop != redop)
    return 0;
  p->ew_redop = redop;
  return 1;
}

static int ew_facts(const pcl_kew_t *ew, int nb, prog_t *p) {
  p->ew_redop = -1;
  p->ew_off_or = 0;
  for (int b = 0; b < nb; b++) {
    if (ew[b].s_kind != PCL_KEW_NONE)
      p->ew_off_or |= ew[b].s_off;
    if (ew[b].o_kind != PCL_KEW_NONE)
      p->ew_off_or |= ew[b].o_off;
    if (!ew_redop_add(p, ew[b].nterm, ew[b].redop))
      return 0;
  }
  if (p->ew_redop < 0)
    p->ew_redop = PCL_KOP_REDOP_CALL;
  return 1;
}

static int ewx_facts(const pcl_kewx_t *e, int nb, prog_t *p) {
  p->ew_redop = -1;
  p->ew_off_or = 0;
  for (int b = 0; b < nb; b++, e++) {
    uint64_t o =
        (e->s_kind != PCL_KEW_NONE ? e->s_off : 0) | (e->o_kind != PCL_KEW_NONE ? e->o_off : 0);
    for (int j = 0; j < e->nput; j++)
      o |= e->src[j];
    for (int j = 0; j < PCL_KEW_MAX; j++)
      o |= (e->tdst_mask >> j) & 1u ? e->tdst[j] : 0;
    for (int k = 0; k < e->ncopy; k++)
      o |= e->csrc[k] | e->cdst[k];
    p->ew_off_or |= o;
    if (e->o_kind != PCL_KEW_NONE && !ew_redop_add(p, e->nterm, e->redop))
      return 0;
  }
  if (p->ew_redop < 0)
    p->ew_redop = PCL_KOP_REDOP_CALL;
  return 1;
}

/* The EW program (p->ew = its bound), else the EWX program (p->ew = PCL_EXEC_EWX + its bound), into
 * *image; p->ew = 0 with `why` when neither proof holds. */
static ncclResult_t ew_image(const pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                             const pcl_kblock_t *blocks, prog_t *p, uint8_t **image, char *why,
                             size_t why_len) {
  const int nb = plan->max_blocks;
  const uint64_t half = plan->use_double_scratch_buffer ? c->half : 0;
  const uint64_t scratch = (uint64_t)(uintptr_t)c->cfg.scratch;
  if (p->ll) {
    pcl_kew_t *ew = NULL;
    PCL_CALLOC(ew, (size_t)nb, "exec EW program");
    if (ew == NULL)
      return ncclSystemError;
    p->ew = pcl_exec_ew_build(blocks, nb, scratch, half, ew, why, why_len);
    if (p->ew != 0 && ew_facts(ew, nb, p)) {
      p->stride = (uint32_t)sizeof(pcl_kew_t);
      *image = (uint8_t *)ew;
      return ncclSuccess;
    }
    pcl_free(ew);
  }
  pcl_kewx_t *ewx = NULL;
  PCL_CALLOC(ewx, (size_t)nb, "exec EWX program");
  if (ewx == NULL)
    return ncclSystemError;
  const int bound = pcl_exec_ewx_build(blocks, nb, scratch, half, ewx, why, why_len);
  p->ew = bound != 0 ? PCL_EXEC_EWX + bound : 0;
  if (p->ew != 0 && !ewx_facts(ewx, nb, p)) {
    p->ew = 0;
    snprintf(why, why_len, "its blocks reduce with different ops");
  }
  if (p->ew != 0) {
    p->stride = (uint32_t)sizeof(pcl_kewx_t);
    *image = (uint8_t *)ewx;
    return ncclSuccess;
  }
  pcl_free(ewx);
  return ncclSuccess;
}

/* The device image of a built program: the EW or EWX descriptors when every block runs per
 * element (and PLANCCL_EW_KERNEL allows), else the packed program. */
static ncclResult_t program_image(const pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                                  const pcl_kblock_t *blocks, prog_t *p, uint8_t **image) {
  const int nb = plan->max_blocks;
  /* The EW kernels share their descriptor across each warp by shuffles: whole warps only. */
  if (!c->cfg.interp_only && pcl_param_ew_kernel() && pcl_exec_launch_threads(plan, 1) % 32 == 0 &&
      pcl_exec_fast_threads_ok(plan, blocks, nb)) {
    char why[160] = "";
    PCL_CHECK(ew_image(c, plan, blocks, p, image, why, sizeof(why)));
    if (p->ew != 0) {
      p->threads = pcl_exec_launch_threads(plan, 1);
      return ncclSuccess;
    }
    PCL_INFO(PCL_LOG_EXEC, "plan %s, %llu/%llu bytes: %s, not elementwise (%s)", plan->name,
             (unsigned long long)p->in_bytes, (unsigned long long)p->out_bytes,
             p->ll       ? "LL kernel"
             : p->simple ? "Simple kernel"
                         : "interpreter",
             why);
  }
  PCL_CALLOC(*image, (size_t)p->stride * (size_t)nb, "exec packed program");
  if (*image == NULL)
    return ncclSystemError;
  pcl_exec_pack_blocks(blocks, nb, p->stride, *image);
  return ncclSuccess;
}

static ncclResult_t prog_build(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                               int shift, prog_t *p) {
  ncclResult_t res = ncclSuccess;
  pcl_plan_layout_t l;
  const int vrank = pcl_exec_vrank(c->cfg.rank, shift, plan->n_gpus);
  const pcl_plan_gpu_t *g = &plan->gpus[vrank];
  pcl_kblock_t *h_blocks = NULL;
  uint8_t *h_packed = NULL;
  pcl_kmemchan_t *mem = NULL;
  pcl_kportchan_t *port = NULL;
  pcl_kremote_t *rb = NULL;
  int32_t sems[PCL_KABI_MAX_SEMAPHORES] = {0};
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  p->plan = plan; /* p: a zeroed slot of the table; its image goes with it on failure */
  p->in_bytes = a->in_bytes;
  p->out_bytes = a->out_bytes;
  p->ub = a->ub;
  p->shift = shift;
  p->vrank = vrank;
  PCL_CHECK(pcl_plan_layout(plan, vrank, a->in_bytes, a->out_bytes, &l));
  PCL_CHECK(pcl_exec_shape(plan, vrank, a->in_bytes, a->out_bytes, &p->shape));
  if (g->n_sems > PCL_KABI_MAX_SEMAPHORES)
    return ncclInvalidArgument;
  {
    char why[320];
    p->resident = pcl_exec_coresident(c, plan, why, sizeof(why));
    if (!p->resident) /* once per shape: the program is cached, refused on every call */
      PCL_WARN(PCL_LOG_EXEC, "%s; refused", why);
  }
  PCL_CALLOC(h_blocks, (size_t)plan->max_blocks, "exec blocks");
  PCL_CALLOC(mem, (size_t)g->n_channels[PCL_PLAN_CHAN_MEMORY] + 1, "exec memchans");
  PCL_CALLOC(port, (size_t)g->n_channels[PCL_PLAN_CHAN_PORT] + 1, "exec portchans");
  PCL_CALLOC(rb, (size_t)g->n_rbufs + 1, "exec remotes");
  if (h_blocks == NULL || mem == NULL || port == NULL || rb == NULL) {
    res = ncclSystemError;
    goto out;
  }
  /* A shape that cannot bind still gets a program (zeroed tables) so that prog_check can refuse
   * it alike on every rank; it is never launched. */
  if (!(p->shape.has_port && c->cfg.portchan == NULL) &&
      !((p->shape.remote_io || p->shape.port_io) && a->ub == NULL)) {
    PCL_CHECK_GOTO(bind_tables(c, plan, p, a->ub, mem, rb), res, out);
    if (p->shape.has_port)
      PCL_CHECK_GOTO(bind_ports(c, plan, p, a->ub, port), res, out);
  }
  pcl_exec_bind_t bind = {mem, port, rb};
  PCL_CHECK_GOTO(pcl_exec_build_blocks(plan, vrank, &l, &bind, h_blocks), res, out);
  p->stride = pcl_exec_pack_stride(h_blocks, plan->max_blocks);
  p->ll = !c->cfg.interp_only && pcl_param_ll_kernel() &&
          pcl_exec_ll_eligible(h_blocks, plan->max_blocks);
  if (p->ll)
    pcl_exec_mark_fused(h_blocks, plan->max_blocks);
  p->simple = !p->ll && !c->cfg.interp_only && pcl_param_simple_kernel() &&
              pcl_exec_simple_eligible(h_blocks, plan->max_blocks);
  p->threads = p->ll && pcl_exec_ll_wide(plan, &p->shape, h_blocks, plan->max_blocks)
                   ? plan->num_threads_per_block
                   : pcl_exec_launch_threads(plan, p->ll);
  PCL_CHECK_GOTO(program_image(c, plan, h_blocks, p, &h_packed), res, out);
  for (int i = 0; i < g->n_sems; i++)
    sems[i] = (int32_t)g->sem_init[i];
  /* A new shape may be met while the caller's stream is capturing: allocate and copy on our own
   * non-blocking stream with the relaxed capture mode, which never touches the captured one. */
  cudaThreadExchangeStreamCaptureMode(&mode);
  const uint64_t t0 = now_ns();
  const size_t blocks_bytes = ((size_t)p->stride * plan->max_blocks + 255) & ~(size_t)255;
  /* The plan's semaphores only: the kernels index them below n_sems (checked above). */
  const size_t sem_bytes = ((size_t)g->n_sems * sizeof(int32_t) + 15) & ~(size_t)15;
  PCL_CHECK_GOTO(pcl_progs_image(&c->progs, p, blocks_bytes + (sem_bytes ? sem_bytes : 16)), res,
                 out_mode);
  p->d_blocks = p->image;
  p->d_sems = (int32_t *)((char *)p->image + blocks_bytes);
  PCL_CUDA_CHECK_GOTO(cudaMemcpyAsync(p->d_blocks, h_packed, (size_t)p->stride * plan->max_blocks,
                                      cudaMemcpyHostToDevice, c->side),
                      res, out_mode);
  if (sem_bytes != 0)
    PCL_CUDA_CHECK_GOTO(
        cudaMemcpyAsync(p->d_sems, sems, sem_bytes, cudaMemcpyHostToDevice, c->side), res,
        out_mode);
  /* No host wait here: the first launch after a build waits for this event (ready_wait). */
  PCL_CUDA_CHECK_GOTO(cudaEventRecord(c->built_ev, c->side), res, out_mode);
  c->built_pending = 1;
  c->progs.copy_ns += now_ns() - t0;
out_mode:
  cudaThreadExchangeStreamCaptureMode(&mode);
out:
  pcl_free(rb);
  pcl_free(port);
  pcl_free(mem);
  pcl_free(h_packed);
  pcl_free(h_blocks);
  return res;
}

/* The program of (plan, shape, root); ncclInvalidArgument (WARNed) for a root the plan cannot be
 * relabelled to, which pcl_exec_one_supported refuses quietly beforehand. */
static ncclResult_t prog_get(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a,
                             prog_t **out) {
  const int shift = pcl_plan_root_shift(plan, a->root);
  if (shift < 0) {
    PCL_WARN(PCL_LOG_EXEC, "plan %s cannot run root %d of %d ranks (%d per node)", plan->name,
             a->root, plan->n_gpus, plan->nranks_per_node);
    return ncclInvalidArgument;
  }
  prog_t *p = pcl_progs_find(&c->progs, plan, a->in_bytes, a->out_bytes, shift, a->ub);
  if (p != NULL) {
    *out = p;
    return ncclSuccess;
  }
  pthread_mutex_lock(&c->progs_lock);
  ncclResult_t res = pcl_progs_reserve(&c->progs, &p);
  if (res == ncclSuccess) {
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != c->cfg.cuda_dev)
      cudaSetDevice(c->cfg.cuda_dev);
    const uint64_t t0 = now_ns();
    res = prog_build(c, plan, a, shift, p);
    c->progs.build_ns += now_ns() - t0;
    if (prev != c->cfg.cuda_dev)
      cudaSetDevice(prev);
    if (res == ncclSuccess) {
      pcl_progs_commit(&c->progs, c->cfg.rank);
      *out = p;
    } else {
      pcl_progs_abandon(&c->progs);
    }
  }
  pthread_mutex_unlock(&c->progs_lock);
  return res;
}

static pcl_kvariant_t prog_variant(const prog_t *p) {
  if (p->ew > PCL_EXEC_EWX)
    return p->ew == PCL_EXEC_EWX + 2   ? PCL_KVAR_EWX2
           : p->ew == PCL_EXEC_EWX + 4 ? PCL_KVAR_EWX4
                                       : PCL_KVAR_EWX8;
  return p->ew == 2   ? PCL_KVAR_EW2
         : p->ew == 4 ? PCL_KVAR_EW4
         : p->ew == 8 ? PCL_KVAR_EW8
         : p->ll      ? (p->threads > PCL_KABI_LL_MAX_THREADS ? PCL_KVAR_LL_WIDE : PCL_KVAR_LL)
         : p->simple  ? PCL_KVAR_SIMPLE
                      : PCL_KVAR_INTERP;
}

const char *pcl_exec_one_kernel(pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                                const pcl_exec_args_t *a) {
  prog_t *p;
  if (prog_get(c, plan, a, &p) != ncclSuccess)
    return NULL;
  return pcl_kernels_kernel_name(prog_variant(p), a->dtype);
}

ncclResult_t pcl_exec_one_prepare(pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                                  const pcl_exec_args_t *a) {
  prog_t *p;
  return prog_get(c, plan, a, &p);
}

uint64_t pcl_exec_scratch_avail(const pcl_exec_ctx_t *c, const pcl_plan_t *plan) {
  return plan->use_double_scratch_buffer ? 2 * c->half : c->cfg.scratch_bytes;
}

int pcl_exec_one_supported(pcl_exec_ctx_t *c, const pcl_plan_t *plan, const pcl_exec_args_t *a) {
  prog_t *p;
  int pkt;
  if (plan == NULL || c->cfg.rank >= plan->n_gpus || plan->n_gpus != c->cfg.nranks ||
      pcl_plan_root_shift(plan, a->root) < 0)
    return 0;
  if (prog_get(c, plan, a, &p) != ncclSuccess)
    return 0;
  return prog_check(c, plan, p, a, &pkt, 1);
}

/* 1 when `stream` is capturing, or when CUDA cannot tell (the safe side for both callers). */
static int stream_captured(cudaStream_t stream) {
  enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return cap != cudaStreamCaptureStatusNone;
}

/* The images built since the last launch are copied on the side stream, behind built_ev (one
 * event: the side stream runs the copies in order). An eager launch waits for it on its stream;
 * a captured one cannot wait for work outside its graph, so the host waits (relaxed mode: the
 * capture may be global). */
static ncclResult_t ready_wait(pcl_exec_ctx_t *c, cudaStream_t stream, int captured) {
  if (!captured) {
    PCL_CUDA_CHECK(cudaStreamWaitEvent(stream, c->built_ev, 0));
  } else {
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t e = cudaEventSynchronize(c->built_ev);
    cudaThreadExchangeStreamCaptureMode(&mode);
    PCL_CUDA_CHECK(e);
  }
  c->built_pending = 0;
  return ncclSuccess;
}

ncclResult_t pcl_exec_one_launch(pcl_exec_ctx_t *c, const pcl_plan_t *plan,
                                 const pcl_exec_args_t *a, cudaStream_t stream) {
  prog_t *p;
  int pkt;
  PCL_CHECK(prog_get(c, plan, a, &p));
  if (p->ok_valid && p->ok_dtype == (int)a->dtype && p->ok_op == (int)a->op &&
      p->ok_ll8 == a->force_ll8 && !p->shape.has_port) {
    pkt = p->ok_pkt;
  } else {
    if (!prog_check(c, plan, p, a, &pkt, 0))
      return ncclInvalidUsage;
    if (p->ew != 0) {
      const int op = p->ew_redop == PCL_KOP_REDOP_CALL ? (int)a->op : p->ew_redop;
      p->ok_form[0] = pcl_kernels_ew_form((ncclRedOp_t)op, (pcl_kpkt_t)pkt, 0);
      p->ok_form[1] = pcl_kernels_ew_form((ncclRedOp_t)op, (pcl_kpkt_t)pkt, 1);
      p->ok_word = pcl_kernels_pkt_payload_bytes((pcl_kpkt_t)pkt);
      if (p->ok_form[0] < 0 || p->ok_form[1] < 0 || p->ok_word == 0) {
        /* prog_check accepted the op: the kernels and the check disagree */
        PCL_WARN(PCL_LOG_EXEC, "plan %s: no EW kernel for reduction %d", plan->name, op);
        return ncclInternalError;
      }
    }
    p->ok_valid = 1;
    p->ok_dtype = (int)a->dtype;
    p->ok_op = (int)a->op;
    p->ok_ll8 = a->force_ll8;
    p->ok_pkt = pkt;
  }
  pcl_kargs_t k;
  memset(&k, 0, sizeof(k));
  k.blocks = p->d_blocks;
  k.stride = (uint16_t)p->stride;
  k.state = c->d_state;
  k.sems = p->d_sems;
  k.abort_flag = &c->d_words[1];
  k.error = &c->d_words[0];
  k.in = (uint64_t)(uintptr_t)a->in;
  k.out = (uint64_t)(uintptr_t)a->out;
  k.scratch = (uint64_t)(uintptr_t)c->cfg.scratch;
  k.scratch_half = plan->use_double_scratch_buffer ? c->half : 0;
  k.timeout_ns = c->cfg.timeout_s > 0 ? (uint64_t)c->cfg.timeout_s * 1000000000ull : 0;
  k.prof = c->d_prof;
  k.nranks = (uint16_t)c->cfg.nranks;
  k.launch = c->launch;
  k.pkt = (uint8_t)pkt;
  k.redop = (uint8_t)a->op;
  if (a->op == ncclAvg && p->shape.has_reduce) {
    /* The simulator's avg, inside the same kernel: the rank's result region, scaled once the
     * plan ran with sum (reduce: only the root's). */
    int scale = plan->collective == PCL_PLAN_COLL_ALLREDUCE ||
                plan->collective == PCL_PLAN_COLL_REDUCESCATTER ||
                (plan->collective == PCL_PLAN_COLL_REDUCE && a->root == c->cfg.rank);
    if (scale) {
      k.avg_out = (uint64_t)(uintptr_t)a->out;
      k.avg_count = a->out_bytes / pcl_kernels_dtype_bytes(a->dtype);
    }
  }
  int form = 0;
  if (p->ew != 0) {
    const uint64_t addr = (uint64_t)(uintptr_t)a->in | (uint64_t)(uintptr_t)a->out | p->ew_off_or;
    form = p->ok_form[(addr & (p->ok_word - 1)) == 0];
  }
  /* Most launches need neither: the capture status is asked only when one does, once. */
  const int busy = pcl_progs_busy(&c->progs, p);
  const int captured = c->built_pending || busy ? stream_captured(stream) : 0;
  if (c->built_pending)
    PCL_CHECK(ready_wait(c, stream, captured));
  /* Before the launch, so a proxy that dozed through a quiet spell is polling by the time the
   * kernel's first trigger lands (a launch takes microseconds; the doze up to 50). */
  if (p->shape.has_port)
    pcl_portchan_expect(c->cfg.portchan);
  PCL_CHECK(pcl_kernels_launch(a->dtype, prog_variant(p), form, &k, plan->max_blocks, p->threads,
                               stream));
  if (busy)
    pcl_progs_launched(&c->progs, p, stream, captured);
  return ncclSuccess;
}

void pcl_exec_forget(pcl_exec_ctx_t *c, const pcl_plan_t *plan) {
  drop_progs(c, plan, NULL);
}

ncclResult_t pcl_exec_async_error(pcl_exec_ctx_t *c, uint32_t *kerr) {
  uint32_t e = *(volatile uint32_t *)&c->h_words[0];
  if (kerr)
    *kerr = e;
  if (e != PCL_KERR_NONE && !__atomic_load_n(&c->hang_logged, __ATOMIC_ACQUIRE)) {
    char why[1024];
    /* The report follows the error word by a few stores: not there yet, logged on a later call. */
    if (pcl_exec_hang_report(c, why, sizeof(why)) &&
        !__atomic_exchange_n(&c->hang_logged, 1, __ATOMIC_ACQ_REL))
      PCL_WARN(PCL_LOG_EXEC, "hang report: %s", why);
  }
  switch (e) {
  case PCL_KERR_NONE:
    return ncclSuccess;
  case PCL_KERR_ABORT:
    return ncclInvalidUsage;
  default:
    return ncclSystemError;
  }
}

ncclResult_t pcl_exec_prof_read(pcl_exec_ctx_t *c, pcl_kprof_t *out, int reset) {
  if (c->d_prof == NULL) {
    PCL_WARN(PCL_LOG_EXEC, "phase timing needs kernels built with -DPCL_KPROF=ON");
    return ncclInvalidUsage;
  }
  /* Through the side stream (non-blocking, so it waits for nobody): never a device-wide
   * synchronisation, which would wait for kernels of other ranks sharing the GPU that spin on
   * this rank's next launch. */
  ncclResult_t res = ncclSuccess;
  int prev = -1;
  cudaGetDevice(&prev);
  PCL_CUDA_CHECK_GOTO(cudaSetDevice(c->cfg.cuda_dev), res, out);
  PCL_CUDA_CHECK_GOTO(
      cudaMemcpyAsync(out, c->d_prof, sizeof(*out), cudaMemcpyDeviceToHost, c->side), res, out);
  if (reset)
    PCL_CUDA_CHECK_GOTO(cudaMemsetAsync(c->d_prof, 0, sizeof(*out), c->side), res, out);
  PCL_CUDA_CHECK_GOTO(cudaStreamSynchronize(c->side), res, out);
out:
  if (prev >= 0)
    cudaSetDevice(prev);
  return res;
}

void pcl_exec_abort(pcl_exec_ctx_t *c) {
  if (c == NULL)
    return;
  __atomic_store_n(&c->h_words[1], 1u, __ATOMIC_RELEASE);
}

ncclResult_t pcl_exec_order(pcl_exec_ctx_t *c, cudaStream_t stream) {
  enum cudaStreamCaptureStatus now = cudaStreamCaptureStatusNone, was = now;
  c->captured = 0;
  if (!c->have_last || (!c->multi && c->last_stream == stream)) {
    c->last_stream = stream; /* the common case: one stream, ordered by CUDA itself */
    c->have_last = 1;
    return ncclSuccess;
  }
  PCL_CUDA_CHECK(cudaStreamIsCapturing(stream, &now));
  c->captured = now != cudaStreamCaptureStatusNone;
  if (c->captured || c->last_stream == stream)
    return ncclSuccess; /* a graph is ordered by its own edges; it cannot wait for eager work */
  if (!c->multi) {
    /* The first second stream: the event is recorded on the last one now, covering what the
     * user queued there since too (a longer wait, never a shorter one). That stream may have
     * been destroyed or gone into a capture since: then CUDA cannot tell, and there is nothing
     * to wait for that it could order. From now on the event follows every eager launch. */
    if (cudaStreamIsCapturing(c->last_stream, &was) != cudaSuccess)
      (void)cudaGetLastError();
    else if (was == cudaStreamCaptureStatusNone)
      PCL_CUDA_CHECK(cudaEventRecord(c->order_ev, c->last_stream));
    c->multi = 1;
    PCL_INFO(PCL_LOG_EXEC, "rank %d: planned calls on several streams: ordered by an event",
             c->cfg.rank);
  }
  PCL_CUDA_CHECK(cudaStreamWaitEvent(stream, c->order_ev, 0));
  c->last_stream = stream;
  return ncclSuccess;
}

ncclResult_t pcl_exec_ordered(pcl_exec_ctx_t *c, cudaStream_t stream) {
  if (!c->multi || c->captured)
    return ncclSuccess;
  PCL_CUDA_CHECK(cudaEventRecord(c->order_ev, stream));
  return ncclSuccess;
}

void pcl_exec_fail(pcl_exec_ctx_t *c) {
  uint32_t none = PCL_KERR_NONE;
  if (c == NULL)
    return;
  __atomic_compare_exchange_n(&c->h_words[0], &none, PCL_KERR_LAUNCH, 0, __ATOMIC_ACQ_REL,
                              __ATOMIC_ACQUIRE);
  pcl_exec_abort(c);
}

int pcl_exec_hang_report(pcl_exec_ctx_t *c, char *buf, size_t len) {
  const volatile pcl_khang_t *vh =
      (const volatile pcl_khang_t *)((char *)c->h_words + PCL_KHANG_OFFSET);
  if (len > 0)
    buf[0] = '\0';
  if (__atomic_load_n(&vh->valid, __ATOMIC_ACQUIRE) != 1u)
    return 0;
  pcl_khang_t h;
  memcpy(&h, (const void *)vh, sizeof(h));
  pcl_exec_hang_where_t w;
  memset(&w, 0, sizeof(w));
  w.rank = c->cfg.rank; /* the program's plan rank once it is found */
  w.scratch = (uint64_t)(uintptr_t)c->cfg.scratch;
  w.scratch_bytes = c->cfg.scratch_bytes;
  w.barriers = (uint64_t)(uintptr_t)c->d_state->barrier;
  w.barrier_bytes = sizeof(c->d_state->barrier);
  pcl_plan_layout_t l;
  enum { MAX_PORTS = 64 }; /* port channels of one rank named in a report; more go unnamed */
  uint64_t tail[MAX_PORTS], inbound[MAX_PORTS];
  int peer[MAX_PORTS];
  pthread_mutex_lock(&c->progs_lock);
  for (int i = 0; i < c->progs.n; i++) {
    const prog_t *p = &c->progs.v[i];
    if ((uint64_t)(uintptr_t)p->d_blocks != h.prog)
      continue;
    const pcl_plan_gpu_t *g = &p->plan->gpus[p->vrank];
    w.plan = p->plan;
    w.rank = p->vrank;
    w.shift = p->shift;
    w.kernel = pcl_kernels_variant_name(prog_variant(p));
    if (pcl_plan_layout(p->plan, p->vrank, p->in_bytes, p->out_bytes, &l) == ncclSuccess)
      w.layout = &l;
    w.scratch_half = p->plan->use_double_scratch_buffer ? c->half : 0;
    w.sems = (uint64_t)(uintptr_t)p->d_sems;
    w.nsems = g->n_sems;
    const pcl_plan_channel_t *ch = g->channels[PCL_PLAN_CHAN_PORT];
    for (int k = 0; k < g->n_channels[PCL_PLAN_CHAN_PORT] && k < MAX_PORTS; k++) {
      pcl_portchan_info_t info;
      if (c->cfg.portchan == NULL ||
          pcl_portchan_info(c->cfg.portchan, pcl_exec_prank(ch[k].peer, p->shift, p->plan->n_gpus),
                            pcl_plan_chan_index(ch, k), &info) != ncclSuccess)
        continue;
      tail[w.nports] = (uint64_t)(uintptr_t)info.fifo.tail;
      inbound[w.nports] = info.local_inbound;
      peer[w.nports++] = pcl_exec_prank(ch[k].peer, p->shift, p->plan->n_gpus);
    }
    w.port_tail = tail;
    w.port_inbound = inbound;
    w.port_peer = peer;
    break;
  }
  pthread_mutex_unlock(&c->progs_lock);
  return pcl_exec_hang_describe(&h, &w, buf, len);
}
