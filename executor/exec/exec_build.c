/* SPDX-License-Identifier: MIT
 * Building one rank's device program from a parsed plan and a layout: op translation, chunk ->
 * byte offsets, thread-block-group slicing, pipeline iteration counts, channel and remote-buffer
 * tables. Pure CPU code (no CUDA calls), so it is unit-tested without a GPU. */
#include <string.h>
#include "exec.h"
#include "log.h"

/* Every op the validator accepts fits the interpreter's handlers. */
_Static_assert(PCL_PLAN_MAX_OP_BUFS <= PCL_KABI_MAX_OP_REFS, "plan refs per op side > kernel's");
_Static_assert(PCL_PLAN_MAX_OP_CHANNELS <= PCL_KABI_MAX_OP_IDS, "plan channel ids > kernel's");
_Static_assert(PCL_PLAN_MAX_OP_SEMS <= PCL_KABI_MAX_OP_IDS, "plan semaphore ids > kernel's");

/* Kernel op of each plan op (common/ops.def); -1 where the kernel has none. */
#define PCL_KOPOF_K(id) PCL_KOP_##id
#define PCL_KOPOF_X(id) -1
static const int8_t kop_of[PCL_PLAN_OP_COUNT] = {
#define PCL_OP(id, name, kernel, ...) [PCL_PLAN_OP_##id] = PCL_KOPOF_##kernel(id),
#include "ops.def"
#undef PCL_OP
};

int pcl_exec_kop_of(int t) {
  return (unsigned)t < PCL_PLAN_OP_COUNT ? kop_of[t] : -1;
}

/* Byte range of a ref: chunk math, then the op's thread-block-group slice. */
static void ref_range(const pcl_plan_layout_t *l, const pcl_plan_op_t *op, const pcl_plan_ref_t *r,
                      uint64_t *off, uint64_t *len) {
  *off = pcl_plan_chunk_offset(l, r->type, r->index);
  *len = pcl_plan_chunk_size(l, r->type, r->size);
  if (op->tbg_size > 1) {
    uint64_t so, sl;
    pcl_plan_tbg_slice(*len, l->align, op->tbg_id, op->tbg_size, &so, &sl);
    *off += so;
    *len = sl;
  }
}

/* One block being built: the plan, its gpu, block and layout, the bound resources (or NULL),
 * the kernel block written and its remote-buffer slots (plan remote buffer ids by first use). */
typedef struct {
  const pcl_plan_t *plan;
  const pcl_plan_gpu_t *g;
  const pcl_plan_block_t *pb;
  const pcl_plan_layout_t *l;
  const pcl_exec_bind_t *bind;
  pcl_kblock_t *kb;
  int rbuf_of[PCL_KABI_MAX_REMOTES];
  int nrslot;
} block_ctx_t;

/* The block's channel counts (checked against the kernel's limits) and bound channels. */
static ncclResult_t block_channels(const block_ctx_t *c) {
  const pcl_plan_block_t *pb = c->pb;
  const pcl_exec_bind_t *bind = c->bind;
  pcl_kblock_t *kb = c->kb;
  if (pb->n_channels[PCL_PLAN_CHAN_MEMORY] > PCL_KABI_MAX_MEMCHANS ||
      pb->n_channels[PCL_PLAN_CHAN_PORT] > PCL_KABI_MAX_PORTCHANS || pb->n_ops > PCL_KABI_MAX_OPS) {
    PCL_WARN(PCL_LOG_EXEC, "plan %s: gpu %d block %d exceeds the kernel's limits", c->plan->name,
             c->g->id, pb->id);
    return ncclInvalidArgument;
  }
  kb->nmem = (uint8_t)pb->n_channels[PCL_PLAN_CHAN_MEMORY];
  kb->nport = (uint8_t)pb->n_channels[PCL_PLAN_CHAN_PORT];
  for (int i = 0; bind != NULL && i < kb->nmem; i++)
    if (bind->mem)
      kb->mem[i] = bind->mem[pb->channels[PCL_PLAN_CHAN_MEMORY][i]];
  for (int i = 0; bind != NULL && i < kb->nport; i++)
    if (bind->port)
      kb->port[i] = bind->port[pb->channels[PCL_PLAN_CHAN_PORT][i]];
  return ncclSuccess;
}

/* The op's ids: a barrier's id, a semaphore op's semaphores, or its channel slots. */
static ncclResult_t op_ids(const pcl_plan_op_t *po, int t, pcl_kop_t *ko) {
  if (t == PCL_KOP_BARRIER) {
    ko->nids = 1;
    ko->ids[0] = (uint8_t)po->barrier_id;
    ko->nblocks = po->num_threadblocks;
  } else if (t == PCL_KOP_SEM_ACQUIRE || t == PCL_KOP_SEM_RELEASE) {
    ko->nids = po->n_sems;
    for (int k = 0; k < po->n_sems; k++) {
      if (po->sem_ids[k] >= PCL_KABI_MAX_SEMAPHORES)
        return ncclInvalidArgument;
      ko->ids[k] = (uint8_t)po->sem_ids[k];
    }
  } else {
    ko->nids = po->n_channels;
    for (int k = 0; k < po->n_channels; k++)
      ko->ids[k] = (uint8_t)po->channels[k];
  }
  return ncclSuccess;
}

/* A pipeline's inner op count, iterations at this size, unit and scratch wrap. */
static ncclResult_t op_pipeline(const block_ctx_t *c, const pcl_plan_op_t *po, pcl_kop_t *ko) {
  uint64_t iters = pcl_plan_pipeline_iters(c->l, po);
  if (iters > UINT32_MAX)
    return ncclInvalidArgument;
  ko->n_inner = po->n_inner;
  ko->n_iter = (uint32_t)iters;
  ko->unit = po->unit_size;
  ko->scratch_wrap = c->plan->reuse_resources ? (uint32_t)c->l->chunk_bytes : 0;
  return ncclSuccess;
}

/* The block's slot of remote buffer rbuf, given one (and bound) at its first use; -1 when the
 * block would need more slots than the kernel has or rbuf is not the gpu's. */
static int remote_slot(block_ctx_t *c, int rbuf) {
  int s = 0;
  while (s < c->nrslot && c->rbuf_of[s] != rbuf)
    s++;
  if (s == c->nrslot) {
    if (c->nrslot == PCL_KABI_MAX_REMOTES || rbuf < 0 || rbuf >= c->g->n_rbufs)
      return -1;
    c->rbuf_of[c->nrslot++] = rbuf;
    if (c->bind != NULL && c->bind->rbuf != NULL)
      c->kb->remote[s] = c->bind->rbuf[rbuf];
    c->kb->remote[s].kind = c->g->rbufs[rbuf].type;
  }
  return s;
}

/* One buffer ref of an op: its byte range at this size and its local buffer or remote slot. */
static ncclResult_t op_ref(block_ctx_t *c, const pcl_plan_op_t *po, const pcl_plan_ref_t *r,
                           pcl_kref_t *kr) {
  uint64_t off, len;
  ref_range(c->l, po, r, &off, &len);
  if (off + len > UINT32_MAX)
    return ncclInvalidArgument;
  kr->offset = (uint32_t)off;
  kr->size = (uint32_t)len;
  if (r->kind == PCL_PLAN_REF_LOCAL) {
    kr->kind = r->type;
  } else if (r->kind == PCL_PLAN_REF_REMOTE) {
    int s = remote_slot(c, r->rbuf);
    if (s < 0)
      return ncclInvalidArgument;
    kr->kind = PCL_KBUF_REMOTE;
    kr->slot = (uint8_t)s;
  } else {
    PCL_WARN(PCL_LOG_EXEC, "plan %s: switch (NVLS) buffers are not supported", c->plan->name);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* The op's sources then destinations, appended to the block's refs. */
static ncclResult_t op_refs(block_ctx_t *c, const pcl_plan_op_t *po, pcl_kop_t *ko) {
  pcl_kblock_t *kb = c->kb;
  ko->ref_first = kb->nrefs;
  ko->nsrc = po->n_src;
  ko->ndst = po->n_dst;
  for (int k = 0; k < po->n_src + po->n_dst; k++) {
    const pcl_plan_ref_t *r = k < po->n_src ? &po->src[k] : &po->dst[k - po->n_src];
    if (kb->nrefs >= PCL_KABI_MAX_REFS) {
      PCL_WARN(PCL_LOG_EXEC, "plan %s: gpu %d block %d has more than %d buffer refs", c->plan->name,
               c->g->id, c->pb->id, PCL_KABI_MAX_REFS);
      return ncclInvalidArgument;
    }
    ncclResult_t res = op_ref(c, po, r, &kb->refs[kb->nrefs++]);
    if (res != ncclSuccess)
      return res;
  }
  return ncclSuccess;
}

/* Plan op po as kernel op ko: type, channel type, reduction, ids, pipeline fields, refs. */
static ncclResult_t build_op(block_ctx_t *c, const pcl_plan_op_t *po, pcl_kop_t *ko) {
  int t = pcl_exec_kop_of(po->type);
  if (t < 0) {
    PCL_WARN(PCL_LOG_EXEC, "plan %s: op '%s' has no kernel handler", c->plan->name,
             pcl_plan_op_name((pcl_plan_op_type_t)po->type));
    return ncclInvalidArgument;
  }
  ko->type = (uint8_t)t;
  ko->chan_type = po->channel_type == PCL_PLAN_CHAN_MEMORY ? PCL_KCHAN_MEMORY
                  : po->channel_type == PCL_PLAN_CHAN_PORT ? PCL_KCHAN_PORT
                                                           : PCL_KCHAN_NONE;
  ko->redop = (po->reduce_op == PCL_PLAN_RED_NONE || po->reduce_op == PCL_PLAN_RED_AVG)
                  ? PCL_KOP_REDOP_CALL
                  : po->reduce_op;
  ncclResult_t res = op_ids(po, t, ko);
  if (res == ncclSuccess && t == PCL_KOP_PIPELINE)
    res = op_pipeline(c, po, ko);
  if (res != ncclSuccess)
    return res;
  return op_refs(c, po, ko);
}

static ncclResult_t build_block(const pcl_plan_t *plan, const pcl_plan_gpu_t *g,
                                const pcl_plan_block_t *pb, const pcl_plan_layout_t *l,
                                const pcl_exec_bind_t *bind, pcl_kblock_t *kb) {
  block_ctx_t c = {.plan = plan, .g = g, .pb = pb, .l = l, .bind = bind, .kb = kb, .nrslot = 0};
  ncclResult_t res = block_channels(&c);
  for (int i = 0; res == ncclSuccess && i < pb->n_ops; i++)
    res = build_op(&c, &pb->ops[i], &kb->ops[i]);
  if (res != ncclSuccess)
    return res;
  kb->nops = (uint16_t)pb->n_ops;
  kb->nremote = (uint8_t)c.nrslot;
  return ncclSuccess;
}

ncclResult_t pcl_exec_build_blocks(const pcl_plan_t *plan, int rank, const pcl_plan_layout_t *l,
                                   const pcl_exec_bind_t *bind, pcl_kblock_t *blocks) {
  if (plan == NULL || rank < 0 || rank >= plan->n_gpus || blocks == NULL)
    return ncclInvalidArgument;
  const pcl_plan_gpu_t *g = &plan->gpus[rank];
  memset(blocks, 0, sizeof(*blocks) * (size_t)plan->max_blocks);
  for (int b = 0; b < g->n_blocks; b++) {
    ncclResult_t res = build_block(plan, g, &g->blocks[b], l, bind, &blocks[b]);
    if (res != ncclSuccess)
      return res;
  }
  return ncclSuccess;
}

int pcl_exec_launch_threads(const pcl_plan_t *plan, int fast) {
  const int t = plan->num_threads_per_block;
  return fast && t > PCL_KABI_LL_MAX_THREADS ? PCL_KABI_LL_MAX_THREADS : t;
}

int pcl_exec_fast_threads_ok(const pcl_plan_t *plan, const pcl_kblock_t *blocks, int nblocks) {
  const int t = plan->num_threads_per_block;
  if (t <= PCL_KABI_LL_MAX_THREADS)
    return 1;
  for (int b = 0; b < nblocks; b++)
    for (int i = 0; i < blocks[b].nrefs; i++)
      if (blocks[b].refs[i].size > (uint64_t)t * 8)
        return 0;
  return 1;
}

/* The largest range of a program with packet reductions that the wide LL kernel takes. MSCCL++'s
 * 2-rank packet allreduces (reductions in every block) ran faster on it than on the interpreter
 * at 64 KiB calls (allreduce_packet_2: 1.95 against about 2.8 times the reference) and slower at
 * 1 MiB calls (reduce_pack_2: 2.83 against 2.0-2.7), where the reduction path spills at 64
 * registers a thread; its copy-only allgathers (transfer_pack_2) ran faster at both. One H100;
 * the crossover between those sizes was not measured. */
#define PCL_EXEC_WIDE_RED_MAX (64u << 10)

int pcl_exec_ll_wide(const pcl_plan_t *plan, const pcl_exec_shape_t *shape,
                     const pcl_kblock_t *blocks, int nblocks) {
  if (plan->num_threads_per_block <= PCL_KABI_LL_MAX_THREADS ||
      pcl_exec_fast_threads_ok(plan, blocks, nblocks))
    return 0;
  if (!shape->has_pkt_reduce)
    return 1;
  for (int b = 0; b < nblocks; b++)
    for (int i = 0; i < blocks[b].nrefs; i++)
      if (blocks[b].refs[i].size > PCL_EXEC_WIDE_RED_MAX)
        return 0;
  return 1;
}

int pcl_exec_ll_eligible(const pcl_kblock_t *blocks, int nblocks) {
  for (int b = 0; b < nblocks; b++)
    for (int i = 0; i < blocks[b].nops; i++) {
      const pcl_kop_t *op = &blocks[b].ops[i];
      switch (op->type) {
      case PCL_KOP_NOP:
        continue;
      case PCL_KOP_CPKT:
      case PCL_KOP_UPKT:
      case PCL_KOP_PPKT:
      case PCL_KOP_RPPKT:
      case PCL_KOP_REPKT:
      case PCL_KOP_RESPKT:
      case PCL_KOP_RECPKT:
      case PCL_KOP_RECSPKT:
        if (op->chan_type == PCL_KCHAN_PORT || op->nsrc < 1 || op->ndst < 1 ||
            op->nsrc > PCL_KABI_LL_MAX_SRC)
          return 0;
        continue;
      default:
        return 0;
      }
    }
  return 1;
}

int pcl_exec_simple_eligible(const pcl_kblock_t *blocks, int nblocks) {
  for (int b = 0; b < nblocks; b++)
    for (int i = 0; i < blocks[b].nops; i++) {
      const pcl_kop_t *op = &blocks[b].ops[i];
      if (op->chan_type == PCL_KCHAN_PORT)
        return 0;
      switch (op->type) {
      case PCL_KOP_NOP:
      case PCL_KOP_BARRIER:
      case PCL_KOP_SIGNAL:
      case PCL_KOP_RLXSIGNAL:
      case PCL_KOP_WAIT:
      case PCL_KOP_RLXWAIT:
      case PCL_KOP_FLUSH:
      case PCL_KOP_SEM_ACQUIRE:
      case PCL_KOP_SEM_RELEASE:
      case PCL_KOP_PIPELINE:
        continue;
      case PCL_KOP_COPY:
      case PCL_KOP_PUT:
      case PCL_KOP_GET:
      case PCL_KOP_RE:
      case PCL_KOP_RES:
      case PCL_KOP_RRE:
      case PCL_KOP_RRES:
        if (op->nsrc < 1 || op->ndst < 1 || op->nsrc > PCL_KABI_MAX_OP_REFS ||
            op->ndst > PCL_KABI_MAX_OP_REFS)
          return 0;
        continue;
      default:
        return 0;
      }
    }
  return 1;
}

static int same_ref(const pcl_kref_t *a, const pcl_kref_t *b) {
  return a->kind == b->kind && a->slot == b->slot && a->offset == b->offset && a->size == b->size;
}

static int fusable_ll1(const pcl_kblock_t *k) {
  if (k->nops != 2)
    return 0;
  const pcl_kop_t *p = &k->ops[0], *r = &k->ops[1];
  if (p->type != PCL_KOP_PPKT || r->type != PCL_KOP_REPKT || p->chan_type == PCL_KCHAN_PORT ||
      r->chan_type == PCL_KCHAN_PORT || p->nsrc != 1 || p->ndst < 1 ||
      p->ndst > PCL_KABI_LL_MAX_SRC - 1 || r->nsrc != p->ndst + 1 || r->ndst != 1)
    return 0;
  const pcl_kref_t *s = &k->refs[p->ref_first], *rs = &k->refs[r->ref_first];
  if (!same_ref(s, &rs[0]))
    return 0;
  for (int j = 0; j < p->nsrc + p->ndst; j++)
    if (k->refs[p->ref_first + j].size != s->size)
      return 0;
  for (int j = 0; j < r->nsrc + r->ndst; j++)
    if (rs[j].size != s->size)
      return 0;
  const pcl_kref_t *o = &rs[r->nsrc];
  return o->kind != s->kind || same_ref(o, s);
}

int pcl_exec_mark_fused(pcl_kblock_t *blocks, int nblocks) {
  int n = 0;
  for (int b = 0; b < nblocks; b++) {
    blocks[b].flags &= (uint8_t)~PCL_KBLOCK_FUSED_PPKT_REPKT;
    if (fusable_ll1(&blocks[b])) {
      blocks[b].flags |= PCL_KBLOCK_FUSED_PPKT_REPKT;
      n++;
    }
  }
  return n;
}

uint32_t pcl_exec_pack_stride(const pcl_kblock_t *blocks, int nblocks) {
  uint32_t stride = 16;
  for (int b = 0; b < nblocks; b++) {
    uint32_t off[5], bytes;
    pcl_kpack_offsets(&blocks[b], off, &bytes);
    if (bytes > stride)
      stride = bytes;
  }
  return stride;
}

void pcl_exec_pack_blocks(const pcl_kblock_t *blocks, int nblocks, uint32_t stride, void *out) {
  memset(out, 0, (size_t)stride * (size_t)nblocks);
  for (int b = 0; b < nblocks; b++) {
    const pcl_kblock_t *k = &blocks[b];
    char *dst = (char *)out + (size_t)b * stride;
    uint32_t off[5], bytes;
    pcl_kpack_offsets(k, off, &bytes);
    memcpy(dst, k, 16); /* the header */
    memcpy(dst + off[0], k->mem, k->nmem * sizeof(pcl_kmemchan_t));
    memcpy(dst + off[1], k->port, k->nport * sizeof(pcl_kportchan_t));
    memcpy(dst + off[2], k->remote, k->nremote * sizeof(pcl_kremote_t));
    memcpy(dst + off[3], k->ops, k->nops * sizeof(pcl_kop_t));
    memcpy(dst + off[4], k->refs, k->nrefs * sizeof(pcl_kref_t));
  }
}

ncclResult_t pcl_exec_shape(const pcl_plan_t *plan, int rank, uint64_t in_bytes, uint64_t out_bytes,
                            pcl_exec_shape_t *out) {
  memset(out, 0, sizeof(*out));
  for (int r = 0; r < plan->n_gpus; r++) {
    pcl_plan_layout_t l;
    ncclResult_t res = pcl_plan_layout(plan, r, in_bytes, out_bytes, &l);
    if (res != ncclSuccess)
      return res;
    const pcl_plan_gpu_t *g = &plan->gpus[r];
    for (int b = 0; b < g->n_blocks; b++) {
      const pcl_plan_block_t *pb = &g->blocks[b];
      uint64_t unit = 0;
      for (int i = 0; i < pb->n_ops; i++) {
        const pcl_plan_op_t *po = &pb->ops[i];
        if (po->type == PCL_PLAN_OP_PIPELINE)
          unit = po->unit_size;
        else if (!po->in_pipeline)
          unit = 0;
        int t = pcl_exec_kop_of(po->type);
        int red = t >= 0 && (pcl_plan_ops[po->type].flags & PCL_OPF_RED) != 0;
        if (po->channel_type == PCL_PLAN_CHAN_PORT)
          out->has_port = 1;
        out->has_reduce |= red;
        for (int k = 0; k < po->n_src + po->n_dst; k++) {
          const pcl_plan_ref_t *ref = k < po->n_src ? &po->src[k] : &po->dst[k - po->n_src];
          int dst = k >= po->n_src, idx = dst ? k - po->n_src : k;
          uint64_t off, len;
          ref_range(&l, po, ref, &off, &len);
          uint64_t bits = off | len | unit;
          if (plan->reuse_resources && unit)
            bits |= l.chunk_bytes;
          if (pcl_plan_operand_is_packet(po, dst, idx)) {
            out->pkt_or |= bits;
            if (red)
              out->has_pkt_reduce = 1;
          }
          if (red)
            out->red_or |= bits;
          if (ref->kind == PCL_PLAN_REF_REMOTE && ref->type != PCL_PLAN_BUF_SCRATCH)
            out->remote_io = 1;
          else if (ref->kind != PCL_PLAN_REF_REMOTE && ref->type != PCL_PLAN_BUF_SCRATCH &&
                   pcl_plan_operand_by_proxy(po, dst, idx))
            out->port_io = 1;
        }
      }
    }
    if (l.scratch_half_bytes > out->scratch_half)
      out->scratch_half = l.scratch_half_bytes;
  }
  return ncclSuccess;
}
