/* SPDX-License-Identifier: MIT
 * Chunk -> byte layout of a parsed plan for one message size (no allocation, no I/O: this runs
 * on the call path), the "is this size runnable" test, and op classification helpers. */
#include "plan_int.h"

static int op_has(int t, unsigned flag) {
  return (unsigned)t < PCL_PLAN_OP_COUNT && (pcl_plan_ops[t].flags & flag) != 0;
}

int pcl_plan_op_is_packet(int t) {
  return op_has(t, PCL_OPF_PKT);
}

int pcl_plan_op_is_reduce(int t) {
  return op_has(t, PCL_OPF_RED);
}

int pcl_plan_op_is_nvls(int t) {
  return op_has(t, PCL_OPF_NVLS);
}

int pcl_plan_operand_is_packet(const pcl_plan_op_t *op, int dst, int i) {
  if ((unsigned)op->type >= PCL_PLAN_OP_COUNT)
    return 0;
  const pcl_plan_opinfo_t *d = &pcl_plan_ops[op->type];
  int first = dst ? d->dst_pkt : d->src_pkt;
  if (first == PCL_OPPKT_PORT)
    return op->channel_type == PCL_PLAN_CHAN_PORT;
  return first != PCL_OPPKT_NONE && i >= first;
}

int pcl_plan_operand_by_proxy(const pcl_plan_op_t *op, int dst, int i) {
  if (op->channel_type != PCL_PLAN_CHAN_PORT)
    return 0;
  return op->type != PCL_PLAN_OP_RECSPKT || (dst && i >= 1);
}

int pcl_plan_chan_index(const pcl_plan_channel_t *ch, int i) {
  int k = 0;
  for (int j = 0; j < i; j++)
    k += ch[j].peer == ch[i].peer;
  return k;
}

int pcl_plan_buffer_bytes(const pcl_plan_t *plan, uint64_t msg, uint64_t *in, uint64_t *out) {
  uint64_t n = (uint64_t)plan->n_gpus;
  switch (plan->collective) {
  case PCL_PLAN_COLL_ALLGATHER:
    if (msg % n)
      return -1;
    *in = msg / n;
    *out = msg;
    return 0;
  case PCL_PLAN_COLL_REDUCESCATTER:
    if (msg % n)
      return -1;
    *in = msg;
    *out = msg / n;
    return 0;
  default:
    *in = *out = msg;
    return 0;
  }
}

static uint64_t round_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

/* Scratch sizes for a chunk size and a scratch chunk count. */
static void scratch_sizes(const pcl_plan_t *plan, uint64_t chunk, uint32_t nscratch, uint64_t *half,
                          uint64_t *total) {
  uint64_t payload = chunk * nscratch;
  uint64_t h =
      round_up(payload * (plan->protocol == PCL_PLAN_PROTO_LL ? 2 : 1), plan->buffer_alignment);
  *half = h;
  *total = h * (plan->use_double_scratch_buffer ? 2 : 1);
}

/* pcl_plan_layout but for the scratch limit (the caller checks l->scratch_bytes). */
static ncclResult_t chunk_layout(const pcl_plan_t *plan, int rank, uint64_t in_bytes,
                                 uint64_t out_bytes, pcl_plan_layout_t *l) {
  if (plan == NULL || l == NULL || rank < 0 || rank >= plan->n_gpus)
    return ncclInvalidArgument;
  const pcl_plan_gpu_t *g = &plan->gpus[rank];
  uint64_t align = plan->buffer_alignment, chunk;
  const uint32_t nin = g->chunks[PCL_PLAN_BUF_INPUT], nout = g->chunks[PCL_PLAN_BUF_OUTPUT];
  /* Sizes must be multiples of alignment x chunks, so every chunk is the same size. */
  if (nin && in_bytes % (align * nin))
    return ncclInvalidArgument;
  if (nout && out_bytes % (align * nout))
    return ncclInvalidArgument;
  if (nin) {
    chunk = in_bytes / nin;
    if (nout && out_bytes / nout != chunk)
      return ncclInvalidArgument;
  } else if (nout) {
    chunk = out_bytes / nout;
  } else {
    return ncclInvalidArgument;
  }
  l->rank = rank;
  l->in_bytes = in_bytes;
  l->out_bytes = out_bytes;
  l->chunk_bytes = chunk;
  l->align = (uint32_t)align;
  for (int t = 0; t < PCL_PLAN_BUF_COUNT; t++) {
    l->buf_bytes[t] = chunk * g->chunks[t];
    /* Scratch: scratch_bytes below, at least as large, is what the callers limit. */
    if (t != PCL_PLAN_BUF_SCRATCH && l->buf_bytes[t] > PCL_PLAN_MAX_BUF_BYTES)
      return ncclInvalidArgument;
  }
  scratch_sizes(plan, chunk, g->chunks[PCL_PLAN_BUF_SCRATCH], &l->scratch_half_bytes,
                &l->scratch_bytes);
  return ncclSuccess;
}

ncclResult_t pcl_plan_layout(const pcl_plan_t *plan, int rank, uint64_t in_bytes,
                             uint64_t out_bytes, pcl_plan_layout_t *l) {
  ncclResult_t res = chunk_layout(plan, rank, in_bytes, out_bytes, l);
  if (res == ncclSuccess && l->scratch_bytes > PCL_PLAN_MAX_BUF_BYTES)
    return ncclInvalidArgument;
  return res;
}

void pcl_plan_tbg_slice(uint64_t bytes, uint32_t align, uint32_t tb_id, uint32_t tbg_size,
                        uint64_t *off, uint64_t *len) {
  if (tbg_size <= 1 || align == 0) {
    *off = 0;
    *len = bytes;
    return;
  }
  uint64_t units = bytes / align, base = units / tbg_size, rem = units % tbg_size;
  uint64_t id = tb_id < tbg_size ? tb_id : tbg_size;
  *off = (id * base + (id < rem ? id : rem)) * align;
  *len = (base + (id < rem ? 1 : 0)) * align;
  if (tb_id >= tbg_size)
    *len = 0;
}

uint64_t pcl_plan_pipeline_iters(const pcl_plan_layout_t *l, const pcl_plan_op_t *op) {
  if (op->unit_size == 0)
    return 0;
  uint64_t total = (uint64_t)op->num_chunks * l->chunk_bytes;
  return (total + op->unit_size - 1) / op->unit_size;
}

/* 1 when msg is in the plan's range and splits into chunks on every rank with every buffer
 * addressable, *scratch then the largest scratch over the ranks (which may be too large). */
static int sized(const pcl_plan_t *plan, uint64_t msg, uint64_t *scratch) {
  uint64_t in, out, half;
  pcl_plan_layout_t l;
  if (plan == NULL || msg == 0)
    return 0;
  if (msg < plan->min_message_size || msg > plan->max_message_size)
    return 0;
  if (pcl_plan_buffer_bytes(plan, msg, &in, &out) != 0)
    return 0;
  /* The validator makes input/output chunk counts identical on every rank, so rank 0's layout
   * decides; only the scratch size differs between ranks. */
  if (chunk_layout(plan, 0, in, out, &l) != ncclSuccess)
    return 0;
  scratch_sizes(plan, l.chunk_bytes, plan->max_scratch_chunks, &half, scratch);
  return 1;
}

int pcl_plan_size_runnable(const pcl_plan_t *plan, uint64_t msg) {
  uint64_t total;
  return sized(plan, msg, &total) && total <= PCL_PLAN_MAX_BUF_BYTES;
}

uint64_t pcl_plan_scratch_bytes(const pcl_plan_t *plan, uint64_t msg) {
  uint64_t total;
  return sized(plan, msg, &total) && total <= PCL_PLAN_MAX_BUF_BYTES ? total : 0;
}

/* Fits: runnable and its scratch within avail (<= 4 GiB). */
static int segment_fits(const pcl_plan_t *plan, uint64_t bytes, uint64_t avail) {
  uint64_t need;
  return sized(plan, bytes, &need) && need <= avail;
}

static int elementwise(const pcl_plan_t *plan) {
  return plan->collective == PCL_PLAN_COLL_ALLREDUCE ||
         plan->collective == PCL_PLAN_COLL_BROADCAST || plan->collective == PCL_PLAN_COLL_REDUCE;
}

/* Whole when the scratch fits, else segments. A message whose scratch is too large to address
 * (over 4 GiB) cannot run whole but still splits. */
uint64_t pcl_plan_segment_bytes(const pcl_plan_t *plan, uint64_t msg, uint64_t avail) {
  const uint64_t g = PCL_PLAN_SEGMENT_ALIGN;
  uint64_t need;
  if (avail > PCL_PLAN_MAX_BUF_BYTES)
    avail = PCL_PLAN_MAX_BUF_BYTES;
  if (!sized(plan, msg, &need))
    return 0;
  if (need <= avail)
    return msg;
  if (!elementwise(plan))
    return 0;
  /* Scratch grows about linearly with the message: start from the proportional share and step
   * down to a size that fits (a few steps: layouts round chunks to the plan's alignment). */
  uint64_t s = (uint64_t)((double)msg * ((double)avail / (double)need));
  s -= s % g;
  while (s >= g && !segment_fits(plan, s, avail))
    s -= g;
  if (s < g)
    return 0;
  const uint64_t n = (msg + s - 1) / s;
  uint64_t even = (msg + n - 1) / n;
  even = (even + g - 1) / g * g; /* <= s: s is a multiple of g and at least msg / n */
  if (segment_fits(plan, even, avail))
    s = even;
  const uint64_t last = msg - (n - 1) * s;
  return segment_fits(plan, last, avail) ? s : 0;
}

/* Runnable whole is the case where the segment is the message (its scratch under 4 GiB). */
int pcl_plan_size_selectable(const pcl_plan_t *plan, uint64_t msg) {
  return pcl_plan_segment_bytes(plan, msg, PCL_PLAN_MAX_BUF_BYTES) != 0;
}

uint64_t pcl_plan_scratch_bytes_bound(const pcl_plan_t *plan, uint64_t msg) {
  uint64_t in, out, half, total;
  if (plan == NULL || msg < plan->min_message_size || msg == 0)
    return 0;
  if (msg > plan->max_message_size)
    msg = plan->max_message_size;
  uint64_t n = (uint64_t)plan->n_gpus;
  if (plan->collective == PCL_PLAN_COLL_ALLGATHER ||
      plan->collective == PCL_PLAN_COLL_REDUCESCATTER)
    msg -= msg % n; /* largest size that divides */
  if (pcl_plan_buffer_bytes(plan, msg, &in, &out) != 0)
    return 0;
  const pcl_plan_gpu_t *g = &plan->gpus[0];
  uint64_t chunk = g->chunks[PCL_PLAN_BUF_INPUT] ? in / g->chunks[PCL_PLAN_BUF_INPUT]
                                                 : out / g->chunks[PCL_PLAN_BUF_OUTPUT];
  chunk -= chunk % plan->buffer_alignment;
  scratch_sizes(plan, chunk, plan->max_scratch_chunks, &half, &total);
  return total;
}

int pcl_plan_accepts_op(const pcl_plan_t *plan, int op) {
  if (plan == NULL || op < 0 || op > PCL_PLAN_RED_AVG)
    return 0;
  if (op == PCL_PLAN_RED_AVG)
    op = PCL_PLAN_RED_SUM;
  return plan->reduce_ops_mask == 0 || plan->reduce_ops_mask == (1u << op);
}
