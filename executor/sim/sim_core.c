/* SPDX-License-Identifier: MIT
 * Simulator core: builds the simulated world for one seed (buffers, channels, proxies, blocks),
 * sequences each rank's calls, schedules (rank, block) interpreters and proxies under the seed's
 * policy, detects deadlock, and drives sizes x seeds for pcl_sim_run. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "alloc.h"
#include "log.h"
#include "sim_int.h"

/* Policies; pcl_sim_sched_t lists them in this order, one above (0 there = by seed). */
enum { POL_RR = 0, POL_GREEDY_UP = 1, POL_GREEDY_DOWN = 2, POL_RANDOM = 3 };

int sim_fail(sim_t *s, pcl_sim_verdict_t v, const char *fmt, ...) {
  if (s->failed)
    return 0;
  s->failed = 1;
  s->verdict = v;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, s->msglen, fmt, ap);
  va_end(ap);
  return 0;
}

uint64_t sim_rand(sim_t *s) {
  uint64_t x = (s->rng += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void sim_op_path(const sim_t *s, int rank, int block, int flat, char *buf, size_t len) {
  const pcl_plan_block_t *bl = &s->plan->gpus[rank].blocks[block];
  int j = 0;
  for (int f = 0; f < bl->n_ops; j++) {
    const pcl_plan_op_t *op = &bl->ops[f];
    if (f == flat) {
      snprintf(buf, len, "gpus[%d].threadblocks[%d].ops[%d] (%s)", rank, block, j,
               pcl_plan_op_name((pcl_plan_op_type_t)op->type));
      return;
    }
    if (op->type == PCL_PLAN_OP_PIPELINE) {
      if (flat > f && flat <= f + op->n_inner) {
        snprintf(buf, len, "gpus[%d].threadblocks[%d].ops[%d].ops[%d] (%s)", rank, block, j,
                 flat - f - 1, pcl_plan_op_name((pcl_plan_op_type_t)bl->ops[flat].type));
        return;
      }
      f += 1 + op->n_inner;
    } else {
      f++;
    }
  }
  snprintf(buf, len, "gpus[%d].threadblocks[%d]", rank, block);
}

void sim_writer_desc(const sim_t *s, uint32_t tag, char *buf, size_t len) {
  if (tag == 0) {
    snprintf(buf, len, "nothing ever wrote");
    return;
  }
  uint32_t wid = tag & 0xffffffu, call = (tag >> 24) - 1;
  if (wid == SIM_TAG_HOST) {
    snprintf(buf, len, "the host last wrote as input of call %u", call);
    return;
  }
  for (int r = 0; r < s->n; r++)
    for (int b = 0; b < s->plan->gpus[r].n_blocks; b++) {
      int base = s->gop_base[r * s->plan->max_blocks + b];
      if (wid > (uint32_t)base && wid <= (uint32_t)(base + s->plan->gpus[r].blocks[b].n_ops)) {
        char path[192];
        sim_op_path(s, r, b, (int)(wid - (uint32_t)base - 1), path, sizeof(path));
        snprintf(buf, len, "was last written by %s in call %u", path, call);
        return;
      }
    }
  snprintf(buf, len, "was written by an unknown writer");
}

/* ---- World setup ---------------------------------------------------------------------------- */

static int mem_alloc(sim_mem_t *m, uint64_t bytes, const char *what) {
  bytes = (bytes + 15) & ~(uint64_t)15;
  if (bytes == 0)
    bytes = 16;
  m->bytes = bytes;
  m->data = pcl_calloc(bytes, 1, what);
  m->tag = pcl_calloc(bytes / 4, sizeof(uint32_t), what);
  return m->data && m->tag;
}

static void mem_free(sim_mem_t *m) {
  pcl_free(m->data);
  pcl_free(m->tag);
  m->data = NULL;
  m->tag = NULL;
}

static void world_free(sim_t *s) {
  if (s->ranks) {
    for (int r = 0; r < s->n; r++) {
      sim_rank_t *rk = &s->ranks[r];
      mem_free(&rk->mem_in);
      mem_free(&rk->mem_out);
      mem_free(&rk->mem_scratch);
      pcl_free(rk->blocks);
      for (int t = 0; t < 2; t++) {
        pcl_free(rk->inbound[t]);
        pcl_free(rk->expected[t]);
      }
      pcl_free(rk->sems);
      pcl_free(rk->proxy.ring);
    }
  }
  pcl_free(s->ranks);
  s->ranks = NULL;
  if (s->calls) {
    for (int c = 0; c < s->ncalls; c++) {
      if (s->calls[c].inputs)
        for (int r = 0; r < s->n; r++)
          pcl_free(s->calls[c].inputs[r]);
      pcl_free(s->calls[c].inputs);
      pcl_free(s->calls[c].reduced);
      s->calls[c].inputs = NULL;
      s->calls[c].reduced = NULL;
      s->calls[c].nchecked = 0;
    }
  }
}

static ncclResult_t world_build(sim_t *s) {
  const pcl_plan_t *p = s->plan;
  uint64_t max_in = 0, max_out = 0;
  s->half = 0;
  for (int c = 0; c < s->ncalls; c++) {
    if (s->calls[c].in_bytes > max_in)
      max_in = s->calls[c].in_bytes;
    if (s->calls[c].out_bytes > max_out)
      max_out = s->calls[c].out_bytes;
    for (int r = 0; r < s->n; r++) {
      pcl_plan_layout_t l;
      if (pcl_plan_layout(p, r, s->calls[c].in_bytes, s->calls[c].out_bytes, &l) == ncclSuccess &&
          l.scratch_half_bytes > s->half)
        s->half = l.scratch_half_bytes;
    }
  }
  s->half = (s->half + 15) & ~(uint64_t)15;
  PCL_CALLOC(s->ranks, s->n, "sim ranks");
  if (!s->ranks)
    return ncclSystemError;
  for (int r = 0; r < s->n; r++) {
    sim_rank_t *rk = &s->ranks[r];
    const pcl_plan_gpu_t *g = &p->gpus[r];
    rk->rank = r;
    rk->gpu = g;
    int ok;
    if (s->inplace) {
      ok = mem_alloc(&rk->mem_out, max_in > max_out ? max_in : max_out, "sim buffer");
    } else {
      ok = mem_alloc(&rk->mem_in, max_in, "sim input") &&
           mem_alloc(&rk->mem_out, max_out, "sim output");
    }
    ok = ok && mem_alloc(&rk->mem_scratch, s->half * (p->use_double_scratch_buffer ? 2 : 1),
                         "sim scratch");
    PCL_CALLOC(rk->blocks, g->n_blocks ? g->n_blocks : 1, "sim blocks");
    for (int t = 0; t < 2; t++) {
      PCL_CALLOC(rk->inbound[t], g->n_channels[t] ? g->n_channels[t] : 1, "sim semaphores");
      PCL_CALLOC(rk->expected[t], g->n_channels[t] ? g->n_channels[t] : 1, "sim semaphores");
      ok = ok && rk->inbound[t] && rk->expected[t];
    }
    PCL_CALLOC(rk->sems, g->n_sems ? g->n_sems : 1, "sim device semaphores");
    PCL_CALLOC(rk->proxy.ring, SIM_FIFO_CAP, "sim proxy fifo");
    if (!ok || !rk->blocks || !rk->sems || !rk->proxy.ring)
      return ncclSystemError;
    for (int i = 0; i < g->n_sems; i++)
      rk->sems[i] = g->sem_init[i];
    rk->call = -1;
  }
  return ncclSuccess;
}

/* ---- Calls ---------------------------------------------------------------------------------- */

static int call_inputs(sim_t *s, sim_call_t *c, int call) {
  if (c->inputs)
    return 1;
  PCL_CALLOC(c->inputs, s->n, "sim inputs");
  if (!c->inputs)
    return 0;
  for (int r = 0; r < s->n; r++) {
    c->inputs[r] = pcl_calloc(c->in_bytes ? c->in_bytes : 1, 1, "sim input data");
    if (!c->inputs[r])
      return 0;
    sim_gen_input(s, call, r, c->inputs[r], c->in_bytes);
  }
  return 1;
}

static void rank_start_call(sim_t *s, sim_rank_t *r) {
  sim_call_t *c = &s->calls[r->call];
  const pcl_plan_t *p = s->plan;
  if (pcl_plan_layout(p, r->rank, c->in_bytes, c->out_bytes, &r->layout) != ncclSuccess) {
    sim_fail(s, PCL_SIM_ERROR, "rank %d: no layout for size %llu", r->rank,
             (unsigned long long)c->size);
    return;
  }
  if (!call_inputs(s, c, r->call)) {
    sim_fail(s, PCL_SIM_ERROR, "out of memory generating inputs");
    return;
  }
  r->flag = (uint32_t)r->call + 1; /* a run never nears the wrap (pcl_kflag32) */
  r->ctag = (uint32_t)(r->call % 255) + 1;
  /* In-place: allgather input = output + rank*in_bytes; reducescatter output = input +
   * rank*out_bytes (NCCL's convention); the others share one buffer. */
  uint64_t in_off = 0, out_off = 0;
  if (s->inplace && p->collective == PCL_PLAN_COLL_ALLGATHER)
    in_off = (uint64_t)r->rank * c->in_bytes;
  if (s->inplace && p->collective == PCL_PLAN_COLL_REDUCESCATTER)
    out_off = (uint64_t)r->rank * c->out_bytes;
  r->view_mem[PCL_PLAN_BUF_INPUT] = s->inplace ? &r->mem_out : &r->mem_in;
  r->view_off[PCL_PLAN_BUF_INPUT] = in_off;
  r->view_bytes[PCL_PLAN_BUF_INPUT] = c->in_bytes;
  r->view_mem[PCL_PLAN_BUF_OUTPUT] = &r->mem_out;
  r->view_off[PCL_PLAN_BUF_OUTPUT] = out_off;
  r->view_bytes[PCL_PLAN_BUF_OUTPUT] = c->out_bytes;
  r->view_mem[PCL_PLAN_BUF_SCRATCH] = &r->mem_scratch;
  r->view_off[PCL_PLAN_BUF_SCRATCH] = 0;
  r->view_bytes[PCL_PLAN_BUF_SCRATCH] = r->mem_scratch.bytes;
  sim_mem_t *im = r->view_mem[PCL_PLAN_BUF_INPUT];
  memcpy(im->data + in_off, c->inputs[r->rank], c->in_bytes);
  uint32_t tag = (r->ctag << 24) | SIM_TAG_HOST;
  for (uint64_t w = 0; w < c->in_bytes / 4; w++)
    im->tag[in_off / 4 + w] = tag;
  for (int b = 0; b < r->gpu->n_blocks; b++) {
    sim_block_t *k = &r->blocks[b];
    k->pc = 0;
    k->done = 0;
    k->in_pipe = 0;
    k->started = 0;
    k->why[0] = 0;
  }
  r->blocks_done = 0;
  if (s->opts->verbose > 1)
    PCL_INFO(PCL_LOG_SIM, "sim: rank %d starts call %d (size %llu, flag %u)", r->rank, r->call,
             (unsigned long long)c->size, r->flag);
}

static void rank_finish_call(sim_t *s, sim_rank_t *r) {
  sim_call_t *c = &s->calls[r->call];
  sim_avg_finish(s, r, c);
  s->cur_size = c->size;
  int ok = sim_check_rank(s, r, c);
  if (s->opts->capture) {
    /* The pristine input (in place, the plan may have overwritten the buffer's copy) and the
     * output buffer as the user sees it (its view: in place, the slot NCCL defines). */
    pcl_sim_capture_t cap = {
        .size = c->size,
        .seed = s->seed,
        .call = r->call,
        .rank = r->rank,
        .inplace = s->inplace,
        .checked_ok = ok,
        .input = c->inputs[r->rank],
        .in_bytes = c->in_bytes,
        .output = r->view_mem[PCL_PLAN_BUF_OUTPUT]->data + r->view_off[PCL_PLAN_BUF_OUTPUT],
        .out_bytes = c->out_bytes,
    };
    s->opts->capture(s->opts->capture_arg, &cap);
  }
  if (++c->nchecked == s->n) {
    for (int k = 0; k < s->n; k++)
      pcl_free(c->inputs[k]);
    pcl_free(c->inputs);
    pcl_free(c->reduced);
    c->inputs = NULL;
    c->reduced = NULL;
  }
  r->call++;
}

/* Starts and completes calls whose blocks are all done; returns 1 while the rank has work. */
static int rank_advance(sim_t *s, sim_rank_t *r) {
  while (!s->failed && r->call < s->ncalls) {
    if (r->call < 0) {
      r->call = 0;
      rank_start_call(s, r);
      continue;
    }
    if (r->blocks_done < r->gpu->n_blocks)
      return 1;
    rank_finish_call(s, r);
    if (!s->failed && r->call < s->ncalls)
      rank_start_call(s, r);
  }
  return 0;
}

/* ---- Scheduling ----------------------------------------------------------------------------- */

/* Runs block b of rank r for up to `budget` bytes of work; 1 if anything changed. */
static int block_turn(sim_t *s, sim_rank_t *r, int b, uint64_t budget) {
  sim_block_t *k = &r->blocks[b];
  const pcl_plan_block_t *bl = &r->gpu->blocks[b];
  int progressed = 0;
  if (r->call < 0 || r->call >= s->ncalls)
    return 0;
  while (!k->done && !s->failed) {
    if (k->pc >= bl->n_ops) {
      k->done = 1;
      r->blocks_done++;
      return 1;
    }
    const pcl_plan_op_t *op = &bl->ops[k->pc];
    int flat = k->pc;
    if (op->type == PCL_PLAN_OP_PIPELINE && !k->in_pipe) {
      k->pipe_iters = op->n_inner ? pcl_plan_pipeline_iters(&r->layout, op) : 0;
      if (k->pipe_iters == 0) {
        k->pc += 1 + op->n_inner;
        progressed = 1;
        continue;
      }
      k->in_pipe = 1;
      k->pipe_iter = 0;
      k->pipe_inner = 0;
      k->started = 0;
    }
    if (k->in_pipe) {
      flat = k->pc + 1 + k->pipe_inner;
      op = &bl->ops[flat];
    }
    s->cur_size = s->calls[r->call].size;
    int was_started = k->started, phase = k->phase;
    uint64_t used = 0;
    s->steps++;
    int rc = sim_op_exec(s, r, b, op, flat, budget, &used);
    if (used || !was_started || phase != k->phase)
      progressed = 1;
    if (rc != SIM_OP_DONE)
      return progressed;
    progressed = 1;
    k->started = 0;
    if (k->in_pipe) {
      if (++k->pipe_inner == bl->ops[k->pc].n_inner) {
        k->pipe_inner = 0;
        if (++k->pipe_iter == k->pipe_iters) {
          k->in_pipe = 0;
          k->pc += 1 + bl->ops[k->pc].n_inner;
        }
      }
    } else {
      k->pc++;
    }
    uint64_t cost = used + SIM_CTRL_COST;
    if (budget != SIM_BUDGET_INF) {
      if (budget <= cost)
        return 1;
      budget -= cost;
    }
  }
  return progressed;
}

static void report_deadlock(sim_t *s) {
  size_t len = 0;
  char *m = s->msg;
  int listed = 0, more = 0;
  len += (size_t)snprintf(m + len, s->msglen - len, "deadlock (size %llu): no block can progress",
                          (unsigned long long)s->cur_size);
  for (int r = 0; r < s->n; r++) {
    sim_rank_t *rk = &s->ranks[r];
    if (rk->call < 0 || rk->call >= s->ncalls)
      continue;
    for (int b = 0; b < rk->gpu->n_blocks; b++) {
      sim_block_t *k = &rk->blocks[b];
      if (k->done)
        continue;
      if (listed >= 12 || len + 64 >= s->msglen) {
        more++;
        continue;
      }
      char path[192];
      int flat = k->in_pipe ? k->pc + 1 + k->pipe_inner : k->pc;
      sim_op_path(s, r, b, flat, path, sizeof(path));
      len += (size_t)snprintf(m + len, s->msglen - len, "\n  %s [call %d, flag %u]: %s", path,
                              rk->call, rk->flag, k->why[0] ? k->why : "blocked");
      if (len >= s->msglen)
        len = s->msglen - 1;
      listed++;
    }
  }
  if (more && len + 40 < s->msglen)
    snprintf(m + len, s->msglen - len, "\n  ... and %d more blocked blocks", more);
  s->failed = 1;
  s->verdict = PCL_SIM_DEADLOCK;
}

static uint64_t pick_budget(sim_t *s) {
  static const uint64_t choices[] = {8, 64, 512, 4096, 65536, SIM_BUDGET_INF};
  return choices[sim_rand(s) % (sizeof(choices) / sizeof(choices[0]))];
}

static ncclResult_t run_schedule(sim_t *s, int policy) {
  int na = 0;
  for (int r = 0; r < s->n; r++)
    na += s->ranks[r].gpu->n_blocks + 1;
  int *ar = pcl_calloc((size_t)na, sizeof(int), "sim agents");
  int *ab = pcl_calloc((size_t)na, sizeof(int), "sim agents");
  int *order = pcl_calloc((size_t)na, sizeof(int), "sim agents");
  if (!ar || !ab || !order) {
    pcl_free(ar);
    pcl_free(ab);
    pcl_free(order);
    return ncclSystemError;
  }
  int i = 0;
  for (int r = 0; r < s->n; r++) {
    for (int b = 0; b < s->ranks[r].gpu->n_blocks; b++, i++) {
      ar[i] = r;
      ab[i] = b;
    }
    ar[i] = r;
    ab[i++] = -1; /* the rank's proxy */
  }
  for (i = 0; i < na; i++)
    order[i] = policy == POL_GREEDY_DOWN ? na - 1 - i : i;
  int lazy = (int)(sim_rand(s) % (uint64_t)s->n), skipping = 1;
  for (;;) {
    int busy = 0;
    for (int r = 0; r < s->n; r++) {
      busy |= rank_advance(s, &s->ranks[r]);
      busy |= s->ranks[r].proxy.tail < s->ranks[r].proxy.head;
    }
    if (s->failed || !busy)
      break;
    int progressed = 0, skipped = 0;
    if (policy == POL_RANDOM) {
      for (i = na - 1; i > 0; i--) {
        int j = (int)(sim_rand(s) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    }
    for (i = 0; i < na && !s->failed; i++) {
      int a = order[i], r = ar[a];
      uint64_t budget = SIM_BUDGET_INF;
      if (policy == POL_RANDOM) {
        if (skipping && r == lazy && sim_rand(s) % 4 != 0) {
          skipped = 1;
          continue;
        }
        budget = pick_budget(s);
      }
      int p = ab[a] < 0 ? sim_proxy_step(s, &s->ranks[r], budget)
                        : block_turn(s, &s->ranks[r], ab[a], budget);
      progressed |= p;
      if (p && (policy == POL_GREEDY_UP || policy == POL_GREEDY_DOWN))
        break;
    }
    if (s->failed)
      break;
    if (!progressed) {
      if (skipped) {
        skipping = 0; /* prove the deadlock with every agent scheduled */
        continue;
      }
      report_deadlock(s);
      break;
    }
    skipping = 1;
  }
  pcl_free(ar);
  pcl_free(ab);
  pcl_free(order);
  return ncclSuccess;
}

/* ---- Entry point ---------------------------------------------------------------------------- */

void pcl_sim_opts_init(pcl_sim_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->dtype = ncclFloat32;
  o->op = ncclSum;
  o->nseeds = 4;
  o->packet = PCL_SIM_LL16;
  o->calls_per_size = 2;
}

static int coll_checked(pcl_plan_coll_t c) {
  return c == PCL_PLAN_COLL_ALLREDUCE || c == PCL_PLAN_COLL_ALLGATHER ||
         c == PCL_PLAN_COLL_REDUCESCATTER || c == PCL_PLAN_COLL_BROADCAST ||
         c == PCL_PLAN_COLL_REDUCE || c == PCL_PLAN_COLL_ALLTOALL;
}

static void global_op_ids(sim_t *s) {
  int base = 0;
  for (int r = 0; r < s->n; r++)
    for (int b = 0; b < s->plan->max_blocks; b++) {
      s->gop_base[r * s->plan->max_blocks + b] = base;
      if (b < s->plan->gpus[r].n_blocks)
        base += s->plan->gpus[r].blocks[b].n_ops;
    }
}

static int opts_valid(const pcl_plan_t *plan, const pcl_sim_opts_t *opts) {
  return plan && opts && (int)opts->dtype >= 0 && (int)opts->dtype < ncclNumTypes &&
         (int)opts->op >= 0 && (int)opts->op < ncclNumOps && (int)opts->schedule >= 0 &&
         opts->schedule <= PCL_SIM_SCHED_RANDOM && (int)opts->layout >= 0 &&
         opts->layout <= PCL_SIM_LAYOUT_OUTOFPLACE;
}

static int coll_reducing(pcl_plan_coll_t c) {
  return c == PCL_PLAN_COLL_ALLREDUCE || c == PCL_PLAN_COLL_REDUCESCATTER ||
         c == PCL_PLAN_COLL_REDUCE;
}

/* A SKIPPED verdict, with why. */
static void skip(pcl_sim_result_t *res, const char *fmt, ...) {
  res->verdict = PCL_SIM_SKIPPED;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->message, sizeof(res->message), fmt, ap);
  va_end(ap);
}

/* The buffer layouts to run into modes, in this order: 1 = in-place buffers, 0 = separate ones.
 * Returns how many; 0 (res skipped, saying why) when the simulator cannot check this plan with
 * these options. */
static int run_modes(const pcl_plan_t *plan, const pcl_sim_opts_t *opts, pcl_sim_result_t *res,
                     int modes[2]) {
  if (!coll_checked(plan->collective)) {
    skip(res, "no reference definition for collective '%s'", pcl_plan_coll_name(plan->collective));
    return 0;
  }
  if (coll_reducing(plan->collective) && !opts->call_op_everywhere &&
      !pcl_sim_plan_supports_op(plan, opts->op)) {
    skip(res, "the plan's reduce ops fix their reduce_op: op '%s' does not apply",
         pcl_sim_op_name(opts->op));
    return 0;
  }
  int nmodes = 0;
  int can_sep = !plan->inplace || plan->outofplace_ok;
  if (opts->layout != PCL_SIM_LAYOUT_OUTOFPLACE && plan->inplace)
    modes[nmodes++] = 1;
  if (opts->layout != PCL_SIM_LAYOUT_INPLACE && can_sep)
    modes[nmodes++] = 0;
  if (nmodes == 0)
    skip(res, "the plan cannot run on %s buffers",
         opts->layout == PCL_SIM_LAYOUT_INPLACE ? "in-place" : "separate (out-of-place)");
  return nmodes;
}

static void sim_init(sim_t *s, const pcl_plan_t *plan, const pcl_sim_opts_t *opts,
                     pcl_sim_result_t *res) {
  memset(s, 0, sizeof(*s));
  s->plan = plan;
  s->opts = opts;
  s->n = plan->n_gpus;
  s->dt = opts->dtype;
  s->op = coll_reducing(plan->collective) ? opts->op : ncclSum;
  s->es = pcl_dtype_bytes(opts->dtype);
  s->P = opts->packet == PCL_SIM_LL8 ? 4 : 8;
  s->msg = res->message;
  s->msglen = sizeof(res->message);
}

/* Sizes into res: given or automatic, keeping the runnable ones that hold whole elements. */
static void pick_sizes(const sim_t *s, pcl_sim_result_t *res) {
  const pcl_plan_t *plan = s->plan;
  const pcl_sim_opts_t *opts = s->opts;
  uint64_t cand[PCL_SIM_MAX_SIZES];
  int ncand = opts->sizes ? (opts->nsizes < PCL_SIM_MAX_SIZES ? opts->nsizes : PCL_SIM_MAX_SIZES)
                          : pcl_sim_auto_sizes(plan, opts->max_bytes, cand, PCL_SIM_MAX_SIZES);
  for (int i = 0; i < ncand; i++) {
    uint64_t sz = opts->sizes ? opts->sizes[i] : cand[i], ib, ob;
    if (!pcl_plan_size_runnable(plan, sz) || pcl_plan_buffer_bytes(plan, sz, &ib, &ob) != 0)
      continue;
    if (ib % s->es || ob % s->es ||
        (plan->collective == PCL_PLAN_COLL_ALLTOALL && ib % (s->n * s->es)))
      continue;
    res->sizes[res->nsizes++] = sz;
  }
}

/* The calls (calls_per_size of each size in res, in order), global op ids and temporaries. */
static ncclResult_t sim_alloc(sim_t *s, const pcl_sim_result_t *res) {
  const pcl_plan_t *plan = s->plan;
  int per = s->opts->calls_per_size > 0 ? s->opts->calls_per_size : 2;
  s->ncalls = res->nsizes * per;
  PCL_CALLOC(s->calls, s->ncalls, "sim calls");
  s->gop_base = pcl_calloc((size_t)s->n * (size_t)(plan->max_blocks ? plan->max_blocks : 1),
                           sizeof(int), "sim op ids");
  s->tmp_acc = pcl_calloc(SIM_STEP_MAX + 64, 1, "sim temp");
  s->tmp_src = pcl_calloc(SIM_STEP_MAX + 64, 1, "sim temp");
  if (!s->calls || !s->gop_base || !s->tmp_acc || !s->tmp_src)
    return ncclSystemError;
  global_op_ids(s);
  for (int c = 0; c < s->ncalls; c++) {
    s->calls[c].size = res->sizes[c / per];
    pcl_plan_buffer_bytes(plan, s->calls[c].size, &s->calls[c].in_bytes, &s->calls[c].out_bytes);
  }
  return ncclSuccess;
}

static void sim_release(sim_t *s) {
  pcl_free(s->calls);
  pcl_free(s->gop_base);
  pcl_free(s->tmp_acc);
  pcl_free(s->tmp_src);
}

/* The scheduling policy of a seed: the one asked for, else the first three seeds round-robin
 * and greedy up and down, the others random. */
static int seed_policy(const pcl_sim_opts_t *opts, uint64_t seed) {
  return opts->schedule != PCL_SIM_SCHED_BY_SEED ? (int)opts->schedule - 1
         : seed < 3                              ? (int)seed
                                                 : POL_RANDOM;
}

/* Every seed on every buffer layout, each in a world of its own, until one fails. */
static ncclResult_t run_seeds(sim_t *s, const int *modes, int nmodes, pcl_sim_result_t *res) {
  const pcl_sim_opts_t *opts = s->opts;
  int nseeds = opts->nseeds > 0 ? opts->nseeds : 1;
  for (int k = 0; k < nseeds * nmodes && !s->failed; k++) {
    s->inplace = modes[k / nseeds];
    s->seed = opts->seed + (uint64_t)(k % nseeds);
    s->rng = s->seed * 0x2545f4914f6cdd1dull + 1;
    s->cur_size = 0;
    ncclResult_t ret = world_build(s);
    if (ret == ncclSuccess)
      ret = run_schedule(s, seed_policy(opts, s->seed));
    world_free(s);
    if (ret != ncclSuccess)
      return ret;
    if (s->failed)
      res->failed_seed = s->seed;
    if (opts->verbose)
      PCL_INFO(PCL_LOG_SIM, "sim %s: seed %llu %s", s->plan->name, (unsigned long long)s->seed,
               s->failed ? pcl_sim_verdict_name(s->verdict) : "PASS");
  }
  return ncclSuccess;
}

/* The verdict into res; a failure's message gets the case that failed appended. */
static void sim_verdict(const sim_t *s, pcl_sim_result_t *res) {
  const pcl_plan_t *plan = s->plan;
  res->verdict = s->failed ? s->verdict : PCL_SIM_PASS;
  if (s->failed) {
    size_t l = strlen(res->message);
    snprintf(res->message + l, sizeof(res->message) - l,
             " [plan %s, size %llu, seed %llu, %s/%s%s]", plan->name,
             (unsigned long long)s->cur_size, (unsigned long long)s->seed, pcl_dtype_name(s->dt),
             pcl_sim_op_name(s->op), plan->inplace && !s->inplace ? ", out-of-place buffers" : "");
  }
  res->failed_size = s->failed ? s->cur_size : 0;
  res->steps = s->steps;
}

ncclResult_t pcl_sim_run(const pcl_plan_t *plan, const pcl_sim_opts_t *opts,
                         pcl_sim_result_t *res) {
  memset(res, 0, sizeof(*res));
  if (!opts_valid(plan, opts)) {
    res->verdict = PCL_SIM_ERROR;
    snprintf(res->message, sizeof(res->message), "bad simulator options");
    return ncclInvalidArgument;
  }
  int modes[2];
  int nmodes = run_modes(plan, opts, res, modes);
  if (nmodes == 0)
    return ncclSuccess;
  sim_t s;
  sim_init(&s, plan, opts, res);
  pick_sizes(&s, res);
  if (res->nsizes == 0) {
    skip(res, "no runnable size for %s", pcl_dtype_name(opts->dtype));
    return ncclSuccess;
  }
  ncclResult_t ret = sim_alloc(&s, res);
  if (ret == ncclSuccess)
    ret = run_seeds(&s, modes, nmodes, res);
  if (ret == ncclSuccess)
    sim_verdict(&s, res);
  sim_release(&s);
  if (ret != ncclSuccess && res->verdict == PCL_SIM_PASS) {
    res->verdict = PCL_SIM_ERROR;
    snprintf(res->message, sizeof(res->message), "simulator ran out of memory");
  }
  return ret;
}
