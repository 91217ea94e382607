/* SPDX-License-Identifier: MIT
 * Semantic validation of a converted plan: op shapes and buffer kinds, chunk ranges on every
 * rank, channel pairing across ranks, signal/wait balance, barriers, pipelines, and refusal of
 * NVLS (NVLink multicast stays off in planccl). Errors carry the JSON path of the culprit. */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "plan_int.h"

#define MASK_I (1u << PCL_PLAN_BUF_INPUT)
#define MASK_O (1u << PCL_PLAN_BUF_OUTPUT)
#define MASK_S (1u << PCL_PLAN_BUF_SCRATCH)
#define MASK_ANY (MASK_I | MASK_O | MASK_S)
#define CH_MEM (1u << PCL_PLAN_CHAN_MEMORY)
#define CH_PORT (1u << PCL_PLAN_CHAN_PORT)

typedef struct {
  pcl_plan_t *plan;
  pcl_plan_ctx_t *c;
  const pcl_plan_gpu_t *gpu;
  const pcl_plan_op_t *op;
  const char *name; /* op name for messages */
} vctx_t;

/* Sets the context path to the op at flat index k of block b of gpu g:
 * "gpus[g].threadblocks[b].ops[i]" or "...ops[i].ops[j]" for pipeline inner ops. */
static void set_op_path(pcl_plan_ctx_t *c, int g, const pcl_plan_block_t *blk, int k) {
  int top = 0, inner = -1;
  for (int i = 0; i < blk->n_ops; top++) {
    const pcl_plan_op_t *op = &blk->ops[i];
    int span = 1 + (op->type == PCL_PLAN_OP_PIPELINE ? op->n_inner : 0);
    if (k < i + span) {
      inner = k == i ? -1 : k - i - 1;
      break;
    }
    i += span;
  }
  pcl_plan_path_pop(c, 0);
  pcl_plan_path_key(c, "gpus");
  pcl_plan_path_idx(c, g);
  pcl_plan_path_key(c, "threadblocks");
  pcl_plan_path_idx(c, blk->id);
  pcl_plan_path_key(c, "ops");
  pcl_plan_path_idx(c, top);
  if (inner >= 0) {
    pcl_plan_path_key(c, "ops");
    pcl_plan_path_idx(c, inner);
  }
}

static void set_gpu_path(pcl_plan_ctx_t *c, int g, const char *key) {
  pcl_plan_path_pop(c, 0);
  pcl_plan_path_key(c, "gpus");
  pcl_plan_path_idx(c, g);
  if (key)
    pcl_plan_path_key(c, key);
}

/* ---- Op shape checks ------------------------------------------------------------------- */

static const char *side_name(int dst) {
  return dst ? "dst_buff" : "src_buff";
}

static ncclResult_t want_count(vctx_t *v, int dst, int min, int max) {
  int n = dst ? v->op->n_dst : v->op->n_src;
  const char *side = side_name(dst);
  if (n >= min && n <= max)
    return ncclSuccess;
  if (max == 0)
    return pcl_plan_fail(v->c, side, "op '%s' takes no %s", v->name, side);
  if (min == max)
    return pcl_plan_fail(v->c, side, "op '%s' needs exactly %d %s entr%s, got %d", v->name, min,
                         side, min == 1 ? "y" : "ies", n);
  if (n < min)
    return pcl_plan_fail(v->c, side, "op '%s' needs at least %d %s entr%s, got %d", v->name, min,
                         side, min == 1 ? "y" : "ies", n);
  return pcl_plan_fail(v->c, side, "op '%s' takes at most %d %s entries, got %d", v->name, max,
                       side, n);
}

/* refs [from, to) of one side must be of `kind` with a type in `mask`. */
static ncclResult_t want_refs(vctx_t *v, int dst, int from, int to, int kind, unsigned mask,
                              const char *role) {
  const pcl_plan_ref_t *refs = dst ? v->op->dst : v->op->src;
  int n = dst ? v->op->n_dst : v->op->n_src;
  if (to > n)
    to = n;
  for (int i = from; i < to; i++) {
    char key[32];
    snprintf(key, sizeof(key), "%s[%d]", side_name(dst), i);
    if (refs[i].kind != kind)
      return pcl_plan_fail(v->c, key, "op '%s' needs a %s buffer here (%s), got a %s reference",
                           v->name, kind == PCL_PLAN_REF_LOCAL ? "local" : "remote", role,
                           refs[i].kind == PCL_PLAN_REF_LOCAL ? "local" : "remote");
    if (!(mask & (1u << refs[i].type)))
      return pcl_plan_fail(v->c, key, "op '%s' needs a %s%s buffer here (%s), got %s", v->name,
                           kind == PCL_PLAN_REF_REMOTE ? "remote " : "",
                           mask == MASK_S ? "scratch" : "non-scratch", role,
                           pcl_plan_buf_name(refs[i].type));
  }
  return ncclSuccess;
}

static ncclResult_t want_chan(vctx_t *v, unsigned mask) {
  int ct = v->op->channel_type;
  if (ct != PCL_PLAN_CHAN_NONE && ct != PCL_PLAN_CHAN_SWITCH && (mask & (1u << ct)))
    return ncclSuccess;
  return pcl_plan_fail(v->c, "channel_type", "op '%s' needs channel_type %s, got %s", v->name,
                       mask == CH_MEM    ? "memory"
                       : mask == CH_PORT ? "port"
                                         : "memory or port",
                       pcl_plan_chan_name(ct));
}

static ncclResult_t want_channel_ids(vctx_t *v, int min) {
  if (v->op->n_channels >= min)
    return ncclSuccess;
  return pcl_plan_fail(v->c, "channel_ids", "op '%s' needs channel_ids (at least %d)", v->name,
                       min);
}

static ncclResult_t no_channel_ids(vctx_t *v) {
  if (v->op->n_channels == 0)
    return ncclSuccess;
  return pcl_plan_fail(v->c, "channel_ids", "op '%s' takes no channel_ids", v->name);
}

/* Port data ops: thread i drives channel_ids[i] with dst_buff[first + i]; the two must name the
 * same peer. first is 0 except for a port recspkt, whose dst_buff[0..1] are local (the result
 * and its packet copy, which the proxy then sends to dst_buff[2..]). */
static ncclResult_t port_pairs(vctx_t *v, int first) {
  const pcl_plan_op_t *op = v->op;
  if (first && op->n_channels != op->n_dst - first)
    return pcl_plan_fail(v->c, "channel_ids",
                         "port op '%s' needs one channel per dst_buff entry from "
                         "dst_buff[%d] on (%d channels, %d such dst)",
                         v->name, first, op->n_channels, op->n_dst - first);
  if (!first && op->n_channels != op->n_dst)
    return pcl_plan_fail(v->c, "channel_ids",
                         "port op '%s' needs one channel per dst_buff entry "
                         "(%d channels, %d dst)",
                         v->name, op->n_channels, op->n_dst);
  for (int i = 0; i < op->n_channels; i++) {
    int peer = v->gpu->channels[PCL_PLAN_CHAN_PORT][op->gpu_channels[i]].peer;
    const pcl_plan_ref_t *d = &op->dst[first + i];
    if (d->kind == PCL_PLAN_REF_REMOTE && d->rank != peer) {
      char key[32];
      snprintf(key, sizeof(key), "dst_buff[%d]", first + i);
      return pcl_plan_fail(v->c, key,
                           "remote buffer of rank %d written through port channel "
                           "slot %d, which connects to rank %d",
                           d->rank, op->channels[i], peer);
    }
  }
  return ncclSuccess;
}

/* Same type for all local sources (the kernel takes the source buffer of src_buff[0]). */
static ncclResult_t same_src_type(vctx_t *v) {
  for (int i = 1; i < v->op->n_src; i++)
    if (v->op->src[i].type != v->op->src[0].type) {
      char key[32];
      snprintf(key, sizeof(key), "src_buff[%d]", i);
      return pcl_plan_fail(v->c, key, "op '%s' sources must all be in the same buffer", v->name);
    }
  return ncclSuccess;
}

/* Data ops move equal-sized ranges on every side. */
static ncclResult_t equal_sizes(vctx_t *v) {
  const pcl_plan_op_t *op = v->op;
  uint32_t size = op->n_src ? op->src[0].size : op->n_dst ? op->dst[0].size : 0;
  for (int d = 0; d < 2; d++) {
    const pcl_plan_ref_t *refs = d ? op->dst : op->src;
    int n = d ? op->n_dst : op->n_src;
    for (int i = 0; i < n; i++)
      if (refs[i].size != size) {
        char key[40];
        snprintf(key, sizeof(key), "%s[%d].size", side_name(d), i);
        return pcl_plan_fail(v->c, key,
                             "op '%s' moves %u chunks here but %u elsewhere: sizes must "
                             "match",
                             v->name, refs[i].size, size);
      }
  }
  return ncclSuccess;
}

#define TRY(x) PCL_TRY(x)

/* A count of the op table: PCL_OPN_SRC stands for the op's number of sources. */
static int table_count(const pcl_plan_op_t *op, int n) {
  return n == PCL_OPN_SRC ? op->n_src : n;
}

/* What the op table fixes for every op: channel kinds, entry counts, channel ids, and that only
 * the ops that name port channels take them. */
static ncclResult_t check_op_table(vctx_t *v, const pcl_plan_opinfo_t *d) {
  const pcl_plan_op_t *op = v->op;
  if (d->chans)
    TRY(want_chan(v, d->chans));
  TRY(want_count(v, 0, table_count(op, d->src_min), table_count(op, d->src_max)));
  TRY(want_count(v, 1, table_count(op, d->dst_min), table_count(op, d->dst_max)));
  if (d->ids == PCL_OPIDS_NONE)
    TRY(no_channel_ids(v));
  if (d->ids == PCL_OPIDS_ONE)
    TRY(want_channel_ids(v, 1));
  if (!(d->flags & PCL_OPF_SYNC) && op->n_channels && op->channel_type == PCL_PLAN_CHAN_PORT &&
      !(d->chans & PCL_OPCH_PORT))
    return pcl_plan_fail(v->c, "channel_type", "op '%s' cannot use port channels", v->name);
  return ncclSuccess;
}

/* The fields of the ops that take no buffers: barrier, semaphores, pipeline. */
static ncclResult_t check_control_op(vctx_t *v) {
  const pcl_plan_op_t *op = v->op;
  if (op->type == PCL_PLAN_OP_BARRIER) {
    if (op->barrier_id < 0)
      return pcl_plan_fail(v->c, "barrier_id", "barrier needs barrier_id");
    if (op->num_threadblocks == 0)
      return pcl_plan_fail(v->c, "num_threadblocks", "barrier needs num_threadblocks");
    if (op->num_threadblocks > v->gpu->n_blocks)
      return pcl_plan_fail(v->c, "num_threadblocks",
                           "barrier of %d threadblocks but the gpu has %d", op->num_threadblocks,
                           v->gpu->n_blocks);
  }
  if ((op->type == PCL_PLAN_OP_SEM_ACQUIRE || op->type == PCL_PLAN_OP_SEM_RELEASE) &&
      op->n_sems == 0)
    return pcl_plan_fail(v->c, "semaphore_ids", "op '%s' needs semaphore_ids", v->name);
  if (op->type == PCL_PLAN_OP_PIPELINE && op->unit_size % v->plan->buffer_alignment)
    return pcl_plan_fail(v->c, "iter_context.unit_size",
                         "unit_size %u is not a multiple of buffer_alignment %u", op->unit_size,
                         v->plan->buffer_alignment);
  return ncclSuccess;
}

/* The kinds of each op's buffer references (local or remote, scratch or not), which the table
 * leaves to each op since every position has its own role in messages. */
static ncclResult_t check_op_refs(vctx_t *v) {
  const pcl_plan_op_t *op = v->op;
  int port = op->channel_type == PCL_PLAN_CHAN_PORT;
  int ppkt = op->type == PCL_PLAN_OP_PPKT;
  switch (op->type) {
  case PCL_PLAN_OP_PUT:
  case PCL_PLAN_OP_PWS:
  case PCL_PLAN_OP_PWSF:
  case PCL_PLAN_OP_PPKT:
    /* Port put-packet copies packets that are already in scratch (2x size) to remote scratch. */
    TRY(want_refs(v, 0, 0, op->n_src, PCL_PLAN_REF_LOCAL, ppkt && port ? MASK_S : MASK_ANY,
                  ppkt && port ? "port put-packet sends packets from scratch" : "source"));
    TRY(same_src_type(v));
    TRY(want_refs(v, 1, 0, op->n_dst, PCL_PLAN_REF_REMOTE, ppkt ? MASK_S : MASK_ANY,
                  ppkt ? "packets land in the peer's scratch" : "destination"));
    break;
  case PCL_PLAN_OP_GET:
    TRY(want_refs(v, 0, 0, op->n_src, PCL_PLAN_REF_REMOTE, MASK_ANY, "source"));
    TRY(want_refs(v, 1, 0, op->n_dst, PCL_PLAN_REF_LOCAL, MASK_ANY, "destination"));
    break;
  case PCL_PLAN_OP_COPY:
  case PCL_PLAN_OP_CPKT:
  case PCL_PLAN_OP_UPKT: {
    int up = op->type == PCL_PLAN_OP_UPKT, cp = op->type == PCL_PLAN_OP_CPKT;
    TRY(want_refs(v, 0, 0, 1, PCL_PLAN_REF_LOCAL, up ? MASK_S : MASK_ANY,
                  up ? "packets are unpacked from scratch" : "source"));
    TRY(want_refs(v, 1, 0, 1, PCL_PLAN_REF_LOCAL, cp ? MASK_S : MASK_ANY,
                  cp ? "packets are written to scratch" : "destination"));
    break;
  }
  case PCL_PLAN_OP_RPPKT:
    TRY(want_refs(v, 0, 0, 1, PCL_PLAN_REF_LOCAL, MASK_S, "packets are read from scratch"));
    TRY(want_refs(v, 1, 0, op->n_dst, PCL_PLAN_REF_REMOTE, MASK_S,
                  "packets land in the peer's scratch"));
    break;
  case PCL_PLAN_OP_RE:
  case PCL_PLAN_OP_RES:
    TRY(want_refs(v, 0, 0, op->n_src, PCL_PLAN_REF_LOCAL, MASK_ANY, "reduce input"));
    TRY(want_refs(v, 1, 0, 1, PCL_PLAN_REF_LOCAL, MASK_ANY, "reduce result"));
    TRY(want_refs(v, 1, 1, op->n_dst, PCL_PLAN_REF_REMOTE, MASK_ANY, "result sent to a peer"));
    break;
  case PCL_PLAN_OP_RRE:
  case PCL_PLAN_OP_RRES:
    TRY(want_refs(v, 0, 0, 1, PCL_PLAN_REF_LOCAL, MASK_ANY, "local reduce input"));
    TRY(want_refs(v, 0, 1, op->n_src, PCL_PLAN_REF_REMOTE, MASK_ANY, "remote reduce input"));
    TRY(want_refs(v, 1, 0, 1, PCL_PLAN_REF_LOCAL, MASK_ANY, "reduce result"));
    TRY(want_refs(v, 1, 1, op->n_dst, PCL_PLAN_REF_REMOTE, MASK_ANY, "result sent to a peer"));
    break;
  case PCL_PLAN_OP_REPKT:
  case PCL_PLAN_OP_RESPKT:
  case PCL_PLAN_OP_RECPKT:
  case PCL_PLAN_OP_RECSPKT: {
    int copy = op->type == PCL_PLAN_OP_RECPKT || op->type == PCL_PLAN_OP_RECSPKT;
    TRY(want_refs(v, 0, 0, 1, PCL_PLAN_REF_LOCAL, MASK_ANY, "own data"));
    TRY(want_refs(v, 0, 1, op->n_src, PCL_PLAN_REF_LOCAL, MASK_S,
                  "peers' packets are read from scratch"));
    TRY(want_refs(v, 1, 0, 1, PCL_PLAN_REF_LOCAL, MASK_ANY, "reduce result"));
    if (copy)
      TRY(want_refs(v, 1, 1, 2, PCL_PLAN_REF_LOCAL, MASK_S, "packet copy of the result"));
    TRY(want_refs(v, 1, 1 + copy, op->n_dst, PCL_PLAN_REF_REMOTE, MASK_S,
                  "packets land in the peer's scratch"));
    break;
  }
  default:
    break;
  }
  return ncclSuccess;
}

static ncclResult_t check_op_shape(vctx_t *v) {
  const pcl_plan_op_t *op = v->op;
  const pcl_plan_opinfo_t *d = &pcl_plan_ops[op->type];
  if (d->flags & PCL_OPF_NVLS)
    return ncclSuccess; /* refused by check_nvls */
  TRY(check_op_table(v, d));
  TRY(check_control_op(v));
  TRY(check_op_refs(v));
  if (d->ids == PCL_OPIDS_PORT && op->channel_type == PCL_PLAN_CHAN_PORT) {
    TRY(want_channel_ids(v, 1));
    TRY(port_pairs(v, 0));
  }
  /* Port recspkt (exec_ops.cuh): the block reduces into dst_buff[0] and the packet copy
   * dst_buff[1], then thread j hands dst_buff[1] -> dst_buff[2 + j] to channel_ids[j]. */
  if (op->type == PCL_PLAN_OP_RECSPKT && op->channel_type == PCL_PLAN_CHAN_PORT) {
    TRY(want_channel_ids(v, 1));
    TRY(port_pairs(v, 2));
  }
  return equal_sizes(v);
}

/* Chunk ranges against the owning rank's chunk counts. */
static ncclResult_t check_ranges(vctx_t *v) {
  for (int d = 0; d < 2; d++) {
    const pcl_plan_ref_t *refs = d ? v->op->dst : v->op->src;
    int n = d ? v->op->n_dst : v->op->n_src;
    for (int i = 0; i < n; i++) {
      const pcl_plan_ref_t *r = &refs[i];
      if (r->kind == PCL_PLAN_REF_SWITCH)
        continue;
      uint32_t chunks = v->plan->gpus[r->rank].chunks[r->type];
      char key[48];
      const char *whose = r->kind == PCL_PLAN_REF_REMOTE ? "remote " : "";
      if (r->index >= chunks) {
        snprintf(key, sizeof(key), "%s[%d].index", side_name(d), i);
        return pcl_plan_fail(v->c, key, "chunk index %u out of range [0, %u) of %s%s buffer%s",
                             r->index, chunks, whose, pcl_plan_buf_name(r->type),
                             r->kind == PCL_PLAN_REF_REMOTE ? " (on its owner)" : "");
      }
      if ((uint64_t)r->index + r->size > chunks) {
        snprintf(key, sizeof(key), "%s[%d].size", side_name(d), i);
        return pcl_plan_fail(v->c, key, "chunks [%u, %u) exceed the %u chunks of %s%s buffer",
                             r->index, r->index + r->size, chunks, whose,
                             pcl_plan_buf_name(r->type));
      }
    }
  }
  return ncclSuccess;
}

/* ---- Whole-plan passes ------------------------------------------------------------------ */

static ncclResult_t check_nvls(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int b = 0; b < gpu->n_blocks; b++)
      for (int k = 0; k < gpu->blocks[b].n_ops; k++) {
        const pcl_plan_op_t *op = &gpu->blocks[b].ops[k];
        if (pcl_plan_op_is_nvls(op->type) || op->channel_type == PCL_PLAN_CHAN_SWITCH) {
          set_op_path(c, g, &gpu->blocks[b], k);
          return pcl_plan_fail(c, "name",
                               "NVLS op '%s' refused: NVLink multicast is disabled in "
                               "planccl",
                               pcl_plan_op_name(op->type));
        }
      }
    if (gpu->n_switch) {
      set_gpu_path(c, g, "channels");
      return pcl_plan_fail(c, NULL,
                           "switch channel refused: NVLink multicast is disabled in "
                           "planccl");
    }
  }
  return ncclSuccess;
}

static ncclResult_t check_chunks(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  int n = p->n_gpus;
  for (int g = 0; g < n; g++) {
    const uint32_t *ch = p->gpus[g].chunks;
    const uint32_t *ch0 = p->gpus[0].chunks;
    set_gpu_path(c, g, NULL);
    if (ch[0] != ch0[0])
      return pcl_plan_fail(c, "input_chunks",
                           "%u input chunks but gpus[0] has %u: every rank must "
                           "split its buffers alike",
                           ch[0], ch0[0]);
    if (ch[1] != ch0[1])
      return pcl_plan_fail(c, "output_chunks",
                           "%u output chunks but gpus[0] has %u: every rank "
                           "must split its buffers alike",
                           ch[1], ch0[1]);
    if (ch[0] == 0 || ch[1] == 0)
      continue;
    /* One chunk size for all buffers: in_bytes / in_chunks == out_bytes / out_chunks. */
    uint64_t want_out = ch[0];
    const char *why = "input and output are the same size";
    if (p->collective == PCL_PLAN_COLL_ALLGATHER) {
      want_out = (uint64_t)ch[0] * n;
      why = "allgather output is nranks x input";
    } else if (p->collective == PCL_PLAN_COLL_REDUCESCATTER) {
      if (ch[0] % n || ch[0] / n != ch[1])
        return pcl_plan_fail(c, "output_chunks",
                             "%u output chunks disagree with %u input chunks "
                             "(reducescatter input is nranks x output)",
                             ch[1], ch[0]);
      continue;
    }
    if (want_out != ch[1])
      return pcl_plan_fail(c, "output_chunks",
                           "%u output chunks disagree with %u input chunks "
                           "(%s, so chunk sizes must match)",
                           ch[1], ch[0], why);
  }
  return ncclSuccess;
}

/* Pairs the k-th channel of A to B with the k-th channel of B to A (per type). */
static ncclResult_t pair_channels(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  for (int t = 0; t < 2; t++)
    for (int a = 0; a < p->n_gpus; a++) {
      pcl_plan_gpu_t *ga = &p->gpus[a];
      for (int i = 0; i < ga->n_channels[t]; i++) {
        int b = ga->channels[t][i].peer, k = 0;
        for (int j = 0; j < i; j++)
          k += ga->channels[t][j].peer == b;
        pcl_plan_gpu_t *gb = &p->gpus[b];
        int seen = 0, found = -1;
        for (int j = 0; j < gb->n_channels[t]; j++)
          if (gb->channels[t][j].peer == a && seen++ == k)
            found = j;
        if (found < 0) {
          int have = 0;
          for (int j = 0; j < gb->n_channels[t]; j++)
            have += gb->channels[t][j].peer == a;
          set_gpu_path(c, a, "channels");
          return pcl_plan_fail(c, NULL,
                               "%s channel %d to rank %d has no partner: rank %d has %d %s "
                               "channel%s to rank %d (channels must pair up)",
                               pcl_plan_chan_name(t), i, b, b, have, pcl_plan_chan_name(t),
                               have == 1 ? "" : "s", a);
        }
        ga->channels[t][i].peer_channel = found;
      }
    }
  return ncclSuccess;
}

static ncclResult_t check_rbufs(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int i = 0; i < gpu->n_rbufs; i++) {
      const pcl_plan_rbuf_t *rb = &gpu->rbufs[i];
      set_gpu_path(c, g, "remote_buffers");
      pcl_plan_path_idx(c, i);
      if (p->gpus[rb->rank].chunks[rb->type] == 0)
        return pcl_plan_fail(c, "type", "rank %d has no %s chunks", rb->rank,
                             pcl_plan_buf_name(rb->type));
      for (int t = 0; t < 2; t++) {
        if (!(rb->access & (1u << t)))
          continue;
        int have = 0;
        for (int j = 0; j < gpu->n_channels[t]; j++)
          have |= gpu->channels[t][j].peer == rb->rank;
        if (!have)
          return pcl_plan_fail(c, "access_channel_types",
                               "buffer of rank %d is accessed through "
                               "%s channels but rank %d has no %s "
                               "channel to rank %d",
                               rb->rank, pcl_plan_chan_name(t), g, pcl_plan_chan_name(t), rb->rank);
      }
    }
  }
  return ncclSuccess;
}

/* Barriers: every block named by a barrier id must take part equally often, and the number of
 * blocks taking part must equal num_threadblocks. */
static ncclResult_t check_barriers(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int id = 0; id < PCL_PLAN_MAX_BARRIERS; id++) {
      int nblocks = 0, want = -1, first_count = -1;
      for (int b = 0; b < gpu->n_blocks; b++) {
        int count = 0;
        for (int k = 0; k < gpu->blocks[b].n_ops; k++) {
          const pcl_plan_op_t *op = &gpu->blocks[b].ops[k];
          if (op->type != PCL_PLAN_OP_BARRIER || op->barrier_id != id)
            continue;
          if (want < 0)
            want = op->num_threadblocks;
          if (op->num_threadblocks != want) {
            set_op_path(c, g, &gpu->blocks[b], k);
            return pcl_plan_fail(c, "num_threadblocks",
                                 "barrier %d used with %d and %d "
                                 "threadblocks",
                                 id, want, op->num_threadblocks);
          }
          count++;
        }
        if (!count)
          continue;
        nblocks++;
        if (first_count < 0)
          first_count = count;
        if (count != first_count) {
          set_gpu_path(c, g, "threadblocks");
          pcl_plan_path_idx(c, b);
          return pcl_plan_fail(c, NULL, "threadblock runs barrier %d %d times, others %d times", id,
                               count, first_count);
        }
      }
      if (want >= 0 && nblocks != want) {
        set_gpu_path(c, g, "threadblocks");
        return pcl_plan_fail(c, NULL,
                             "barrier %d expects %d threadblocks but %d take part (it "
                             "would hang)",
                             id, want, nblocks);
      }
    }
  }
  return ncclSuccess;
}

/* Signal/wait balance. The k-th signal on A's channel to B increments the semaphore that B's
 * paired channel waits on, so per channel pair #signals(A) must equal #waits(B) for every
 * message size. Ops inside a pipeline run ceil(num_chunks * chunk / unit) times, which depends
 * on the size, so counts are kept per iteration rate (num_chunks/unit_size as a reduced
 * fraction; 0 = outside pipelines) and must match rate by rate. That is exact for plans that
 * pair signals and waits in pipelines of the same rate; plans that balance across different
 * rates are refused (conservatively). */
typedef struct {
  uint64_t num, den;
} rate_t;

static int rate_index(rate_t *rates, int *nrates, int cap, uint64_t num, uint64_t den) {
  if (den == 0)
    return 0;
  uint64_t g = pcl_plan_gcd64(num, den);
  num /= g;
  den /= g;
  for (int i = 1; i < *nrates; i++)
    if (rates[i].num == num && rates[i].den == den)
      return i;
  if (*nrates >= cap)
    return -1;
  rates[*nrates].num = num;
  rates[*nrates].den = den;
  return (*nrates)++;
}

static ncclResult_t check_signal_wait(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  enum { MAX_RATES = 16 };
  rate_t rates[MAX_RATES] = {{0, 0}};
  int nrates = 1;
  ncclResult_t res = ncclSuccess;
  /* Offsets of each (gpu, type) channel row in one flat counter array. */
  size_t total = 0;
  for (int g = 0; g < p->n_gpus; g++)
    total += p->gpus[g].n_channels[0] + p->gpus[g].n_channels[1];
  if (total == 0)
    return ncclSuccess;
  size_t *base = pcl_calloc((size_t)p->n_gpus * 2, sizeof(size_t), "plan sw base");
  int32_t *sig = pcl_calloc(total * MAX_RATES, sizeof(int32_t), "plan signal counts");
  int32_t *wait = pcl_calloc(total * MAX_RATES, sizeof(int32_t), "plan wait counts");
  if (!base || !sig || !wait) {
    res = ncclSystemError;
    goto out;
  }
  size_t off = 0;
  for (int g = 0; g < p->n_gpus; g++)
    for (int t = 0; t < 2; t++) {
      base[g * 2 + t] = off;
      off += p->gpus[g].n_channels[t];
    }
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int b = 0; b < gpu->n_blocks; b++) {
      const pcl_plan_block_t *blk = &gpu->blocks[b];
      int rate = 0, left = 0;
      for (int k = 0; k < blk->n_ops; k++) {
        const pcl_plan_op_t *op = &blk->ops[k];
        if (left == 0)
          rate = 0;
        else
          left--;
        if (op->type == PCL_PLAN_OP_PIPELINE) {
          rate = rate_index(rates, &nrates, MAX_RATES, op->num_chunks, op->unit_size);
          left = op->n_inner;
          if (rate < 0) {
            set_op_path(c, g, blk, k);
            res = pcl_plan_fail(c, "iter_context", "more than %d distinct pipeline shapes",
                                MAX_RATES - 1);
            goto out;
          }
          continue;
        }
        int is_sig = (pcl_plan_ops[op->type].flags & PCL_OPF_SIGNALS) != 0;
        int is_wait = (pcl_plan_ops[op->type].flags & PCL_OPF_WAITS) != 0;
        int t = op->channel_type;
        if ((!is_sig && !is_wait) || (t != PCL_PLAN_CHAN_MEMORY && t != PCL_PLAN_CHAN_PORT))
          continue;
        for (int i = 0; i < op->n_channels; i++) {
          size_t row = base[g * 2 + t] + (size_t)op->gpu_channels[i];
          (is_sig ? sig : wait)[row * MAX_RATES + rate]++;
        }
      }
    }
  }
  for (int g = 0; g < p->n_gpus; g++)
    for (int t = 0; t < 2; t++)
      for (int i = 0; i < p->gpus[g].n_channels[t]; i++) {
        const pcl_plan_channel_t *ch = &p->gpus[g].channels[t][i];
        size_t me = base[g * 2 + t] + i, peer = base[ch->peer * 2 + t] + ch->peer_channel;
        for (int r = 0; r < nrates; r++) {
          int32_t s = sig[me * MAX_RATES + r], w = wait[peer * MAX_RATES + r];
          if (s == w)
            continue;
          set_gpu_path(c, g, "channels");
          char where[96] = "";
          if (r)
            snprintf(where, sizeof(where),
                     " per iteration of pipelines with num_chunks/"
                     "unit_size = %llu/%llu",
                     (unsigned long long)rates[r].num, (unsigned long long)rates[r].den);
          res = pcl_plan_fail(c, NULL,
                              "signal/wait mismatch: rank %d signals %d time%s on %s "
                              "channel %d to rank %d, which waits %d time%s on its "
                              "channel %d%s",
                              g, s, s == 1 ? "" : "s", pcl_plan_chan_name(t), i, ch->peer, w,
                              w == 1 ? "" : "s", ch->peer_channel, where);
          goto out;
        }
      }
out:
  pcl_free(base);
  pcl_free(sig);
  pcl_free(wait);
  return res;
}

static ncclResult_t check_ops(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  for (int g = 0; g < p->n_gpus; g++) {
    const pcl_plan_gpu_t *gpu = &p->gpus[g];
    for (int b = 0; b < gpu->n_blocks; b++) {
      const pcl_plan_block_t *blk = &gpu->blocks[b];
      for (int k = 0; k < blk->n_ops; k++) {
        vctx_t v = {.plan = p,
                    .c = c,
                    .gpu = gpu,
                    .op = &blk->ops[k],
                    .name = pcl_plan_op_name(blk->ops[k].type)};
        set_op_path(c, g, blk, k);
        if (pcl_plan_op_is_packet(v.op->type) && p->protocol != PCL_PLAN_PROTO_LL)
          return pcl_plan_fail(c, "name",
                               "packet op '%s' needs protocol LL (the plan is Simple, "
                               "so scratch has no packet space)",
                               v.name);
        TRY(check_op_shape(&v));
        TRY(check_ranges(&v));
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t pcl_plan_validate(pcl_plan_t *p, pcl_plan_ctx_t *c) {
  TRY(check_nvls(p, c));
  TRY(pcl_plan_check_nodes(p, c));
  TRY(check_chunks(p, c));
  TRY(pair_channels(p, c));
  TRY(check_rbufs(p, c));
  TRY(check_ops(p, c));
  TRY(check_barriers(p, c));
  TRY(check_signal_wait(p, c));
  pcl_plan_path_pop(c, 0);
  return ncclSuccess;
}
