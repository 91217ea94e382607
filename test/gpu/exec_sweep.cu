/* SPDX-License-Identifier: MIT
 * The tests one exec_plans rank runs: every plan of its group over sizes, placements, dtypes, ops
 * and packet formats; one plan of each kind under CUDA graphs; back-to-back calls alternating
 * plans and communicators; the latency of a 1 KB LL allreduce and of nop plans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "exec_rank.h"
extern "C" { /* param.h has no C++ guard of its own */
#include "param.h"
}
#include "kernels.h"
extern "C" {
#include "sim.h"
}

#include "gpu_test_check.h"

const char *const xp_kind_names[XP_NKINDS] = {"LL",   "Simple",   "semaphores", "grid barrier",
                                              "port", "pipeline", "tbg",        "zero-copy"};

static int is_packet_op(int t) {
  return t == PCL_PLAN_OP_CPKT || t == PCL_PLAN_OP_UPKT || t == PCL_PLAN_OP_PPKT ||
         t == PCL_PLAN_OP_RPPKT || t == PCL_PLAN_OP_REPKT || t == PCL_PLAN_OP_RESPKT ||
         t == PCL_PLAN_OP_RECPKT || t == PCL_PLAN_OP_RECSPKT;
}

/* Bit k set when the plan is of kind k (XP_KIND_*). */
static unsigned plan_kinds(const pcl_plan_t *pl, int *packets) {
  unsigned m = 1u << (pl->protocol == PCL_PLAN_PROTO_LL ? XP_KIND_LL : XP_KIND_SIMPLE);
  *packets = 0;
  for (int r = 0; r < pl->n_gpus; r++) {
    const pcl_plan_gpu_t *g = &pl->gpus[r];
    if (g->n_channels[PCL_PLAN_CHAN_PORT] > 0)
      m |= 1u << XP_KIND_PORT;
    for (int b = 0; b < g->n_blocks; b++)
      for (int i = 0; i < g->blocks[b].n_ops; i++) {
        const pcl_plan_op_t *op = &g->blocks[b].ops[i];
        if (op->type == PCL_PLAN_OP_SEM_ACQUIRE || op->type == PCL_PLAN_OP_SEM_RELEASE)
          m |= 1u << XP_KIND_SEM;
        if (op->type == PCL_PLAN_OP_BARRIER)
          m |= 1u << XP_KIND_BARRIER;
        if (op->type == PCL_PLAN_OP_PIPELINE)
          m |= 1u << XP_KIND_PIPELINE;
        if (op->tbg_size > 1)
          m |= 1u << XP_KIND_TBG;
        *packets |= is_packet_op(op->type);
      }
  }
  return m;
}

/* Sizes spread over the plan's range (the simulator's own choice), at most `want`. */
static int pick_sizes(const pcl_plan_t *pl, uint64_t *out, int want) {
  uint64_t all[PCL_SIM_MAX_SIZES];
  int n = pcl_sim_auto_sizes(pl, xp_opts.max_msg, all, PCL_SIM_MAX_SIZES), k = 0;
  for (int i = 0; i < want && n > 0; i++) {
    uint64_t s = all[n == 1 ? 0 : (uint64_t)i * (n - 1) / (want > 1 ? want - 1 : 1)];
    if (k == 0 || out[k - 1] != s)
      out[k++] = s;
  }
  return k;
}

/* A view of the case's buffers inside the windows over d_in and d_out (made the first time,
 * collectively): what the NCCL API's symmetric windows give a call. */
static int window_view(xr_t *R, xr_case_t *c, uint8_t *in, uint8_t *out, pcl_exec_userbuf_t **ub) {
  int rank = R->rank;
  if (R->win[0] == NULL)
    for (int k = 0; k < 2; k++)
      CK(pcl_exec_window_create(R->ctx[0], k ? R->d_out : R->d_in, XP_BUF_BYTES, &R->win[k]));
  /* NCCL places these by rank: in-place allgather's input, in-place reduce-scatter's output. */
  const int coll = c->plan->collective;
  uint64_t in_step = c->inplace && coll == PCL_PLAN_COLL_ALLGATHER ? c->in_bytes : 0;
  uint64_t out_step = c->inplace && coll == PCL_PLAN_COLL_REDUCESCATTER ? c->out_bytes : 0;
  pcl_exec_window_t *wi = R->win[pcl_exec_window_holds(R->win[1], in, c->in_bytes)];
  CK(pcl_exec_userbuf_view(R->ctx[0], wi, in, c->in_bytes, in_step, R->win[1], out, c->out_bytes,
                           out_step, ub));
  return 0;
}

/* Registers the case's buffers when the plan reaches user buffers through peers or the proxy
 * (collective: the decision is the same on every rank): every other time as a view of windows,
 * where the plan has no port channel (views are for memory channels only). */
static int maybe_register(xr_t *R, xr_case_t *c, pcl_exec_userbuf_t **ub, int *zerocopy) {
  int rank = R->rank;
  pcl_exec_shape_t shape;
  *ub = NULL;
  c->ub = NULL;
  if (pcl_exec_shape(c->plan, rank, c->in_bytes, c->out_bytes, &shape) != ncclSuccess)
    return 0;
  *zerocopy |= shape.remote_io;
  if (!(shape.remote_io || shape.port_io))
    return 0;
  uint8_t *in, *out;
  xr_bufs(R, c, R->d_in, R->d_out, &in, &out);
  if (!shape.has_port && R->nreg++ % 2 == 1) {
    if (window_view(R, c, in, out, ub))
      return 1;
  } else {
    CK(pcl_exec_userbuf_create(R->ctx[0], in, c->in_bytes, out, c->out_bytes, ub));
  }
  c->ub = *ub;
  return 0;
}

/* Every rank's `mine` (0/1): *same = 1 when all ranks have the same value (a collective step). */
static int agree(xr_t *R, int mine, int *same) {
  int rank = R->rank, v[XP_MAXR];
  v[rank] = mine;
  CK(pcl_bootstrap_allgather(R->boot, v, sizeof(int)));
  *same = 1;
  for (int r = 0; r < R->g->nranks; r++)
    *same &= v[r] == mine;
  return 0;
}

/* One case on comm 0: reference, launch, check, then every rank learns of kernel errors. */
int xs_one_case(xr_t *R, xr_case_t *c, uint64_t seed, xp_plan_res_t *pr, int *kerr) {
  xp_ref_t *x = R->g->ref;
  int rank = R->rank;
  if (rank == 0)
    xr_reference(c->plan, c, seed, x);
  CK(pcl_bootstrap_barrier(R->boot));
  if (x->verdict == PCL_SIM_SKIPPED) {
    pr->skip++;
  } else if (x->verdict != PCL_SIM_PASS && strstr(c->plan->path, "/conformance/") != NULL) {
    /* An MSCCL++ plan the simulator proves wrong (reduce_tbg_2's cross-block race): nothing to
     * compare the GPU with; reported, not failed (CI's simulator tests pin that verdict). */
    pr->simrej++;
    if (!pr->note[0])
      snprintf(pr->note, sizeof(pr->note), "the simulator rejects this MSCCL++ plan (%s); not run",
               pcl_sim_verdict_name((pcl_sim_verdict_t)x->verdict));
  } else if (x->verdict != PCL_SIM_PASS) {
    pr->cases++;
    xr_fail(pr, c, "the simulator says %s: %s", pcl_sim_verdict_name((pcl_sim_verdict_t)x->verdict),
            x->msg);
  } else {
    if (xr_launch(R, 0, c, x, R->d_in + c->shift, R->d_out + c->shift))
      return 1;
    /* Every rank has queued its kernel before any rank queues the read-back behind it: with more
     * streams than hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), a read-back waiting for this
     * rank's spinning kernel can share a queue with a slower rank's launch that kernel needs. */
    CK(pcl_bootstrap_barrier(R->boot));
    if (xr_check(R, 0, c, x, R->d_in + c->shift, R->d_out + c->shift, pr))
      return 1;
  }
  /* Also the barrier after the case: no rank overwrites an input a peer may still read, and rank
   * 0 rewrites the reference only once every rank compared. */
  return xr_any_kernel_error(R, kerr);
}

/* User buffers only element-aligned (a tensor view one element in): the kernels' unaligned
 * forms (the EW kernels have one per form, kernels.h), at the plan's smallest size, 1- and
 * 2-byte dtypes, both packet formats, the plan's placement. Plans that register user buffers
 * are left out (registration is per exact buffer; those run no EW kernel). */
static int misaligned_cases(xr_t *R, const pcl_plan_t *pl, uint64_t msg, xp_plan_res_t *pr,
                            uint64_t *seed) {
  static const ncclDataType_t dts[] = {ncclFloat16, ncclInt8};
  xr_case_t c;
  memset(&c, 0, sizeof(c));
  c.plan = pl;
  c.msg = msg;
  c.inplace = pl->inplace;
  c.op = ncclSum; /* collectives that do not reduce ignore it */
  pcl_exec_shape_t shape;
  if (pcl_plan_buffer_bytes(pl, c.msg, &c.in_bytes, &c.out_bytes) != 0 ||
      c.in_bytes + 64 > XP_BUF_BYTES || c.out_bytes + 64 > XP_BUF_BYTES ||
      pcl_exec_shape(pl, R->rank, c.in_bytes, c.out_bytes, &shape) != ncclSuccess ||
      shape.remote_io || shape.port_io || !pcl_plan_accepts_op(pl, (int)ncclSum))
    return 0;
  for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
    for (int ll8 = 0; ll8 < 2; ll8++) {
      int kerr = 0, agreed = 0;
      c.dt = dts[d];
      c.ll8 = ll8;
      c.shift = (uint32_t)pcl_kernels_dtype_bytes(c.dt);
      uint8_t *in, *out;
      xr_bufs(R, &c, R->d_in + c.shift, R->d_out + c.shift, &in, &out);
      pcl_exec_args_t a = xr_args(&c, in, out);
      int sup = pcl_exec_supported(R->ctx[0], pl, &a);
      if (agree(R, sup, &agreed))
        return 1;
      if (!agreed || !sup)
        continue; /* the aligned cases above already report disagreement and refusals */
      if (xs_one_case(R, &c, (*seed)++, pr, &kerr))
        return 1;
      if (kerr) { /* as the main loop: unpaired channel counters, so everything is rebuilt */
        if (!pr->note[0])
          snprintf(pr->note, sizeof(pr->note),
                   "a kernel recorded an error on misaligned buffers; channels rebuilt");
        xr_teardown(R);
        return xr_setup(R);
      }
    }
  }
  return 0;
}

int xs_run_plan(xr_t *R, const pcl_plan_t *pl, xp_plan_res_t *pr, plan_info_t *info,
                uint64_t *seed) {
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  int packets = 0;
  snprintf(pr->name, sizeof(pr->name), "%s", pl->name);
  info->kinds = plan_kinds(pl, &packets);
  if (!pcl_exec_coresident(R->ctx[0], pl, pr->note, sizeof(pr->note))) {
    pr->refused = 1;
    return 0;
  }
  uint64_t sizes[4];
  int ns = pick_sizes(pl, sizes, xp_opts.quick ? 2 : 4);
  int reducing =
      pl->collective != PCL_PLAN_COLL_ALLGATHER && pl->collective != PCL_PLAN_COLL_BROADCAST;
  /* Broadcast and reduce: case k runs root k mod n, so every root is met across the cases
   * (the executor relabels the plan's ranks; the reference stays the simulator's root 0). */
  const int rooted =
      pl->collective == PCL_PLAN_COLL_BROADCAST || pl->collective == PCL_PLAN_COLL_REDUCE;
  int nth = 0;
  for (int si = 0; si < ns; si++) {
    xr_case_t c;
    memset(&c, 0, sizeof(c));
    c.plan = pl;
    c.msg = sizes[si];
    if (pcl_plan_buffer_bytes(pl, c.msg, &c.in_bytes, &c.out_bytes) != 0 ||
        c.in_bytes > XP_BUF_BYTES || c.out_bytes > XP_BUF_BYTES)
      continue;
    for (int ip = 0; ip < 2; ip++) {
      c.inplace = ip;
      if (c.inplace != pl->inplace && !(pl->inplace && pl->outofplace_ok && !c.inplace))
        continue;
      pcl_exec_userbuf_t *ub = NULL;
      if (maybe_register(R, &c, &ub, &info->zerocopy))
        return 1;
      int kerr = 0;
      for (int dt = 0; dt < ncclNumTypes && !kerr; dt++) {
        if (xp_opts.quick && dt != ncclFloat32 && dt != ncclInt32 && dt != ncclBfloat16)
          continue;
        for (int o = 0; o < (reducing ? 5 : 1) && !kerr; o++) {
          for (int ll8 = 0; ll8 < (packets ? 2 : 1) && !kerr; ll8++) {
            c.dt = (ncclDataType_t)dt;
            c.op = ops[o];
            c.ll8 = ll8;
            c.root = rooted ? nth++ % R->g->nranks : 0;
            uint8_t *in, *out;
            xr_bufs(R, &c, R->d_in, R->d_out, &in, &out);
            pcl_exec_args_t a = xr_args(&c, in, out);
            int sup = pcl_plan_accepts_op(pl, (int)c.op) && pcl_exec_supported(R->ctx[0], pl, &a);
            int agreed = 0;
            if (agree(R, sup, &agreed))
              return 1;
            if (!agreed) { /* a launch on some ranks only would leave them spinning alone */
              xr_fail(pr, &c, "the ranks disagree on whether the executor can run it");
              continue;
            }
            if (!sup) {
              pr->skip++;
              continue;
            }
            int pass0 = pr->pass;
            c.nseg = pcl_exec_segments(R->ctx[0], pl, &a, &c.seg);
            const int segmented = c.nseg > 1;
            pr->segmented += segmented;
            if (xs_one_case(R, &c, (*seed)++, pr, &kerr))
              return 1;
            /* The graph test takes a segmented call where there is one: several kernel nodes. */
            if (pr->pass > pass0 && (!info->have_ok || (segmented && !info->ok_segmented))) {
              info->first_ok = c; /* graph_case registers anew */
              info->have_ok = 1;
              info->ok_segmented = segmented;
            }
          }
        }
      }
      pcl_exec_userbuf_destroy(ub);
      if (kerr) {
        /* A kernel gave up: its channels' counters are no longer paired, so every rank rebuilds
         * its channels and contexts and the plan's remaining cases are not run. */
        if (!pr->note[0])
          snprintf(pr->note, sizeof(pr->note),
                   "a kernel recorded an error (timeout?); channels "
                   "rebuilt, remaining cases not run");
        xr_teardown(R);
        return xr_setup(R);
      }
    }
  }
  if (ns > 0 && misaligned_cases(R, pl, sizes[0], pr, seed))
    return 1;
  if (info->zerocopy)
    info->kinds |= 1u << XP_KIND_ZEROCOPY;
  /* Every plan here must be runnable: an executor that refused all of a plan's cases is broken. */
  if (pr->cases == 0 && pr->skip > 0 && pr->simrej == 0) {
    pr->fail++;
    snprintf(pr->first_fail, sizeof(pr->first_fail), "all %d cases refused by the executor",
             pr->skip);
  }
  return 0;
}

/* Captured once, replayed with new inputs and checked after every replay. The zero-copy kind
 * registers its buffers (they stay registered for all replays). */
static int graph_case(xr_t *R, const xr_case_t *c0, int *ok) {
  int rank = R->rank;
  xr_case_t c = *c0;
  xp_ref_t *x = R->g->ref;
  pcl_exec_userbuf_t *ub = NULL;
  int zc = 0;
  xp_plan_res_t pr;
  memset(&pr, 0, sizeof(pr));
  if (maybe_register(R, &c, &ub, &zc))
    return 1;
  uint8_t *in, *out;
  xr_bufs(R, &c, R->d_in, R->d_out, &in, &out);
  pcl_exec_args_t a = xr_args(&c, in, out);
  CK(pcl_exec_prepare(R->ctx[0], c.plan, &a));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  /* Thread-local capture: other ranks may be threads of this process capturing too. */
  CUCK(cudaStreamBeginCapture(R->st[0], cudaStreamCaptureModeThreadLocal));
  CK(pcl_exec_launch(R->ctx[0], c.plan, &a, R->st[0]));
  CUCK(cudaStreamEndCapture(R->st[0], &g));
  CUCK(cudaGraphInstantiate(&ge, g, 0));
  *ok = 1;
  for (int rep = 0; rep < XP_GRAPH_REPLAYS && *ok == 1; rep++) {
    if (rank == 0)
      xr_reference(c.plan, &c, 900000 + rep, x);
    CK(pcl_bootstrap_barrier(R->boot));
    if (x->verdict != PCL_SIM_PASS) {
      *ok = -1;
      break;
    }
    CUCK(cudaMemsetAsync(R->d_out, 0xa5, xr_region_bytes(&c), R->st[0]));
    CUCK(cudaMemcpyAsync(in, x->in[xr_ref_rank(R, &c)], c.in_bytes, cudaMemcpyHostToDevice,
                         R->st[0]));
    CUCK(cudaGraphLaunch(ge, R->st[0]));
    int fail0 = pr.fail;
    if (xr_check(R, 0, &c, x, R->d_in, R->d_out, &pr))
      return 1;
    int kerr = 0;
    if (xr_any_kernel_error(R, &kerr))
      return 1;
    if (pr.fail > fail0 || kerr)
      *ok = -1;
  }
  if (*ok < 0 && pr.first_fail[0])
    fprintf(stderr, "rank %d: graph: %s\n", rank, pr.first_fail);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  pcl_exec_userbuf_destroy(ub);
  return 0;
}

int xs_run_graphs(xr_t *R, pcl_plan_t **plans, int np, plan_info_t *info) {
  xp_rank_res_t *res = &R->g->res[R->rank];
  for (int k = 0; k < XP_NKINDS; k++) {
    for (int p = 0; p < np; p++) {
      if (!(info[p].kinds & (1u << k)) || !info[p].have_ok)
        continue;
      /* Zero-copy over memory channels where a plan has it (port plans have their own kind). */
      int later = 0;
      for (int q = p + 1; k == XP_KIND_ZEROCOPY && q < np && !later; q++)
        later = (info[q].kinds & (1u << k)) && !(info[q].kinds & (1u << XP_KIND_PORT)) &&
                info[q].have_ok;
      if (later && (info[p].kinds & (1u << XP_KIND_PORT)))
        continue;
      snprintf(res->graph_plan[k], sizeof(res->graph_plan[k]), "%s", plans[p]->name);
      if (graph_case(R, &info[p].first_ok, &res->graph[k]))
        return 1;
      break;
    }
  }
  return 0;
}

/* The n staged calls captured back to back into one graph and replayed once; the graph's
 * programmatic edges (PLANCCL_PDL=1) counted into alt_pdl_edges. */
static int alt_graph(xr_t *R, const xr_case_t *c, int n, uint64_t slot) {
  const int rank = R->rank; /* the check macros name it */
  for (int i = 0; i < n; i++) {
    uint8_t *in, *out;
    xr_bufs(R, &c[i], R->d_in + i * slot, R->d_out + i * slot, &in, &out);
    pcl_exec_args_t a = xr_args(&c[i], in, out);
    CK(pcl_exec_prepare(R->ctx[0], c[i].plan, &a));
  }
  CUCK(cudaStreamSynchronize(R->st[0])); /* the staging copies, outside the graph */
  CK(pcl_bootstrap_barrier(R->boot));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CUCK(cudaStreamBeginCapture(R->st[0], cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; i++)
    if (xr_launch_staged(R, 0, &c[i], R->d_in + i * slot, R->d_out + i * slot)) {
      cudaStreamEndCapture(R->st[0], &g);
      return 1;
    }
  CUCK(cudaStreamEndCapture(R->st[0], &g));
  size_t ne = 0;
  CUCK(cudaGraphGetEdges(g, NULL, NULL, NULL, &ne));
  R->g->res[R->rank].alt_pdl_edges = 0;
  if (ne > 0) {
    cudaGraphNode_t *from = (cudaGraphNode_t *)calloc(ne, sizeof(*from));
    cudaGraphNode_t *to = (cudaGraphNode_t *)calloc(ne, sizeof(*to));
    cudaGraphEdgeData *ed = (cudaGraphEdgeData *)calloc(ne, sizeof(*ed));
    cudaError_t e =
        from && to && ed ? cudaGraphGetEdges(g, from, to, ed, &ne) : cudaErrorMemoryAllocation;
    for (size_t k = 0; e == cudaSuccess && k < ne; k++)
      R->g->res[R->rank].alt_pdl_edges += ed[k].type == cudaGraphDependencyTypeProgrammatic;
    free(from);
    free(to);
    free(ed);
    CUCK(e);
  }
  CUCK(cudaGraphInstantiate(&ge, g, 0));
  CUCK(cudaGraphLaunch(ge, R->st[0]));
  CUCK(cudaStreamSynchronize(R->st[0]));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return 0;
}

/* Back-to-back calls with no host synchronisation between them, each on its own buffers and
 * every input staged before the first: allreduce plans alternating by size, the same interleaved
 * over two communicators, and the same in one CUDA graph. */
int xs_run_alternating(xr_t *R, pcl_plan_t **plans, int np) {
  int rank = R->rank, n = 0;
  static const uint64_t sizes[XP_ALT_CALLS] = {1024, 8192, 65536, 4096, 131072, 2048, 16384, 32768};
  const uint64_t slot = XP_BUF_BYTES / XP_ALT_CALLS;
  xr_case_t c[XP_ALT_CALLS];
  xp_rank_res_t *res = &R->g->res[rank];
  for (int i = 0; i < XP_ALT_CALLS; i++) {
    for (int p = 0; p < np; p++) {
      const pcl_plan_t *pl = plans[(p + i) % np];
      xr_case_t t;
      memset(&t, 0, sizeof(t));
      t.plan = pl;
      t.msg = sizes[i];
      t.dt = ncclFloat32;
      t.op = ncclSum;
      t.inplace = pl->inplace;
      pcl_exec_shape_t shape;
      if (pl->collective != PCL_PLAN_COLL_ALLREDUCE || !pcl_plan_size_runnable(pl, t.msg) ||
          pcl_plan_buffer_bytes(pl, t.msg, &t.in_bytes, &t.out_bytes) || t.out_bytes > slot ||
          t.in_bytes > slot ||
          pcl_exec_shape(pl, rank, t.in_bytes, t.out_bytes, &shape) != ncclSuccess ||
          shape.remote_io || shape.port_io)
        continue;
      uint8_t *in, *out;
      xr_bufs(R, &t, R->d_in + i * slot, R->d_out + i * slot, &in, &out);
      pcl_exec_args_t a = xr_args(&t, in, out);
      if (!pcl_plan_accepts_op(pl, ncclSum) || !pcl_exec_supported(R->ctx[0], pl, &a) ||
          !pcl_exec_supported(R->ctx[1], pl, &a))
        continue;
      c[n++] = t;
      break;
    }
  }
  if (n == 0)
    return 0;
  /* Two communicators' calls run at once: every rank on a GPU may have one grid of each
   * spinning, so both must fit (the executor's own check counts one communicator). */
  int fit2 = 1;
  for (int i = 0; i < n; i++) {
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(R->dev);
    int fit = pcl_kernels_resident_blocks(c[i].plan->num_threads_per_block);
    cudaSetDevice(prev);
    fit2 &= 2 * R->g->dev_ranks * c[i].plan->max_blocks <= fit;
  }
  for (int mode = 0; mode < XP_ALT_MODES; mode++) {
    if (mode == XP_ALT_TWO && !fit2)
      continue;
    /* Emulated hosts add TCP copy streams per rank: with no host barrier between the graph's
     * launches the shared-hardware-queue cycle described below can form (seen: 8 ranks, 2 per
     * host, every kernel timed out), so the graph mode runs with one host only. */
    if (mode == XP_ALT_GRAPH && R->g->rpn < R->g->nranks)
      continue;
    const int two = mode == XP_ALT_TWO;
    if (rank == 0)
      for (int i = 0; i < n; i++)
        xr_reference(c[i].plan, &c[i], 500000 + 10 * mode + i, &R->g->alt_ref[i]);
    CK(pcl_bootstrap_barrier(R->boot));
    int bad = 0;
    for (int i = 0; i < n; i++)
      bad |= R->g->alt_ref[i].verdict != PCL_SIM_PASS;
    /* Every input first, so the kernels follow each other with nothing between them on a stream
     * (under PLANCCL_PDL=1 each may start while its predecessor ends). */
    for (int i = 0; i < n && !bad; i++)
      if (xr_stage(R, two ? i & 1 : 0, &c[i], &R->g->alt_ref[i], R->d_in + i * slot,
                   R->d_out + i * slot))
        return 1;
    /* No stream synchronisation between the calls, but a host barrier after each launch: every
     * rank has queued call i before any rank queues call i + 1. Ranks share the GPU and there are
     * more streams (two communicators' kernel, side, copy-engine and TCP copy streams: 14 per
     * rank here) than hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, at most 32), so two streams
     * can share a queue; without the barrier a faster rank's call i + 2 (waiting in that queue
     * for its call i) can sit ahead of a slower rank's call i + 1 on the other communicator,
     * which call i + 1 of the faster rank waits for: a cycle only the spin timeout breaks, and
     * the kernels then go on with packets that never arrived (wrong sums, different per host). */
    if (mode != XP_ALT_GRAPH) {
      for (int i = 0; i < n && !bad; i++) {
        if (xr_launch_staged(R, two ? i & 1 : 0, &c[i], R->d_in + i * slot, R->d_out + i * slot))
          return 1;
        CK(pcl_bootstrap_barrier(R->boot));
      }
    } else if (!bad && alt_graph(R, c, n, slot))
      return 1;
    xp_plan_res_t pr;
    memset(&pr, 0, sizeof(pr));
    for (int i = 0; i < n && !bad; i++)
      if (xr_check(R, two ? i & 1 : 0, &c[i], &R->g->alt_ref[i], R->d_in + i * slot,
                   R->d_out + i * slot, &pr))
        return 1;
    int kerr = 0;
    if (xr_any_kernel_error(R, &kerr))
      return 1;
    int pdl_short = mode == XP_ALT_GRAPH && pcl_kernels_pdl() && res->alt_pdl_edges < n - 1;
    res->alt[mode] = bad || pr.fail || kerr || pdl_short ? -1 : 1;
    static const char *const what[XP_ALT_MODES] = {"alternating", "two communicators",
                                                   "alternating in a graph"};
    if (kerr && !res->first_fail[0]) {
      /* A spin timed out (or aborted): the wrong outputs below are its consequence, not a data
       * race; say so first. */
      snprintf(res->first_fail, sizeof(res->first_fail),
               "%s: a kernel recorded an error (timeout?)%s%.300s", what[mode],
               pr.first_fail[0] ? "; then " : "", pr.first_fail);
    } else if (pr.first_fail[0] && !res->first_fail[0]) {
      xp_copy(res->first_fail, sizeof(res->first_fail), pr.first_fail);
    } else if (pdl_short && !res->first_fail[0]) {
      snprintf(res->first_fail, sizeof(res->first_fail),
               "alternating in a graph: PLANCCL_PDL=1 but %d programmatic edges between %d "
               "back-to-back kernels",
               res->alt_pdl_edges, n);
    }
  }
  return 0;
}
