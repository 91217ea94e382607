/* SPDX-License-Identifier: MIT
 * planccl-plan: validate, simulate, show and graph execution plans from the command line
 * (the simulator is the CPU model of the GPU executor, see executor/sim/sim.h), and check tuning
 * files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alloc.h"
#include "plan.h"
#include "sim.h"
#include "tune.h"

/* --seeds and --calls: each multiplies the simulation's time; beyond this it would run for
 * hours without finding more. */
#define PCL_PLAN_TOOL_MAX_COUNT 1000
#define PCL_PLAN_TOOL_MAX_COUNT_S "1000"

static void usage(FILE *f) {
  fprintf(
      f, "usage: planccl-plan COMMAND [OPTIONS] FILE...\n"
         "\n"
         "commands:\n"
         "  validate FILE...   load and validate plans; prints OK or the reason (JSON path)\n"
         "  simulate FILE...   run plans on the CPU simulator for every rank and check results\n"
         "  show FILE          per-rank, per-block op listing\n"
         "  dot FILE           Graphviz graph: ops, block order, cross-rank data and signals\n"
         "  tune FILE...       check tuning files (docs/tuning.md): their shapes and ranges, or\n"
         "                     the reason (JSON path)\n"
         "\n"
         "simulate options:\n"
         "  --sizes LIST       comma-separated message sizes (K/M/G suffixes; registry\n"
         "                     semantics: allgather = total output, reducescatter = total input);\n"
         "                     default: a spread over the plan's range, ends included; sizes a\n"
         "                     plan cannot run are named and skipped\n"
         "  --max-bytes N      cap of the automatic sizes (default: 32M/nranks, 64K..2M)\n"
         "  --dtype T|all      int8 uint8 int32 uint32 int64 uint64 fp16 fp32 fp64 bf16 e4m3\n"
         "                     e5m2 (default fp32)\n"
         "  --op OP|all        sum prod max min avg (default sum; reducing collectives only)\n"
         "  --seeds N          schedules per case (default 4: round-robin, greedy up, greedy\n"
         "                     down, random...; at most 1000)\n"
         "  --seed S           first seed (default 0)\n"
         "  --packet P|all     ll16 or ll8 (default ll16)\n"
         "  --calls N          calls per size, flag advanced each time (default 2; at most 1000)\n"
         "  --any-op           every reduce op uses the call's op, even where the plan fixes\n"
         "                     reduce_op (what-if runs)\n"
         "  -v, --verbose      also print messages of skipped cases\n"
         "\n"
         "exit status: 0 all good, 1 a plan failed (validation or simulation), 2 usage error\n");
}

static int load(const char *path, pcl_plan_t **plan) {
  char err[1024];
  if (pcl_plan_load(path, plan, err, sizeof(err)) != ncclSuccess) {
    fprintf(stderr, "%s\n", err[0] ? err : path);
    return 0;
  }
  return 1;
}

/* ---- validate ------------------------------------------------------------------------------ */
static int cmd_validate(int nfiles, char **files) {
  int bad = 0;
  for (int i = 0; i < nfiles; i++) {
    pcl_plan_t *p = NULL;
    char err[1024];
    if (pcl_plan_load(files[i], &p, err, sizeof(err)) != ncclSuccess) {
      printf("REFUSED %s\n", err[0] ? err : files[i]);
      bad = 1;
      continue;
    }
    printf("OK      %s: %s %s, %d ranks (%d per node), %s, %s, sizes [%llu, %llu]\n", files[i],
           p->name, pcl_plan_coll_name(p->collective), p->n_gpus, p->nranks_per_node,
           p->protocol == PCL_PLAN_PROTO_LL ? "LL" : "Simple",
           p->inplace ? "in-place" : "out-of-place", (unsigned long long)p->min_message_size,
           (unsigned long long)p->max_message_size);
    pcl_plan_destroy(p);
  }
  return bad;
}

/* ---- tune --------------------------------------------------------------------------------- */
static int cmd_tune(int nfiles, char **files) {
  int bad = 0;
  for (int i = 0; i < nfiles; i++) {
    pcl_tune_t *t = NULL;
    char err[1024];
    if (pcl_tune_load(files[i], &t, err, sizeof(err)) != ncclSuccess) {
      printf("REFUSED %s\n", err[0] ? err : files[i]);
      bad = 1;
      continue;
    }
    printf("OK      %s: %d call shapes, measured on %d x %s (%s), NCCL %s\n", files[i],
           t->n_entries, t->identity.gpus, t->identity.gpu, pcl_tune_link_name(t->identity.link),
           t->identity.nccl);
    for (int e = 0; e < t->n_entries; e++) {
      const pcl_tune_entry_t *x = &t->entries[e];
      printf(
          "  %s, %d ranks (%d per host, %d per GPU), %s, %s%s:", pcl_plan_coll_name(x->collective),
          x->world, x->ranks_per_node, x->ranks_per_gpu, pcl_tune_procs_name(x->procs),
          x->inplace ? "in-place" : "out-of-place", x->registered ? ", registered" : "");
      for (int k = 0; k < x->n_ranges; k++)
        printf(" [%llu, %llu] %s", (unsigned long long)x->ranges[k].min,
               (unsigned long long)x->ranges[k].max, x->ranges[k].path);
      printf("\n");
    }
    pcl_tune_destroy(t);
  }
  return bad;
}

/* ---- simulate ------------------------------------------------------------------------------ */
static int parse_size(const char *s, uint64_t *v) {
  char *end;
  unsigned long long x = strtoull(s, &end, 10);
  if (end == s)
    return 0;
  if (*end == 'K' || *end == 'k')
    x <<= 10, end++;
  else if (*end == 'M' || *end == 'm')
    x <<= 20, end++;
  else if (*end == 'G' || *end == 'g')
    x <<= 30, end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end)
    return 0;
  *v = x;
  return 1;
}

static void fmt_sizes(const pcl_sim_result_t *r, char *buf, size_t len) {
  size_t l = 0;
  buf[0] = 0;
  if (r->nsizes == 0) {
    snprintf(buf, len, "-");
    return;
  }
  for (int i = 0; i < r->nsizes && l + 24 < len; i++) {
    uint64_t v = r->sizes[i];
    if (v % (1 << 20) == 0)
      l += (size_t)snprintf(buf + l, len - l, "%s%lluM", i ? "," : "",
                            (unsigned long long)(v >> 20));
    else if (v % 1024 == 0)
      l += (size_t)snprintf(buf + l, len - l, "%s%lluK", i ? "," : "",
                            (unsigned long long)(v >> 10));
    else
      l += (size_t)snprintf(buf + l, len - l, "%s%llu", i ? "," : "", (unsigned long long)v);
  }
}

typedef struct {
  uint64_t sizes[PCL_SIM_MAX_SIZES];
  int nsizes;
  int dtypes[ncclNumTypes], ndtypes;
  int ops[ncclNumOps], nops;
  int packets[2], npackets;
  pcl_sim_opts_t base;
} sim_args_t;

static int cmd_simulate(int nfiles, char **files, sim_args_t *a) {
  int bad = 0, ncases = 0, npass = 0, nskip = 0, nplans = 0, nrefused = 0;
  printf("%-34s %5s  %-8s %-10s %-5s %-9s %s\n", "plan", "ranks", "dtype", "op", "pkt", "verdict",
         "sizes");
  for (int f = 0; f < nfiles; f++) {
    pcl_plan_t *p = NULL;
    if (!load(files[f], &p)) {
      printf("%-34s %5s  %-8s %-10s %-5s %-9s %s\n", files[f], "-", "-", "-", "-", "REFUSED", "-");
      bad = 1;
      nrefused++;
      continue;
    }
    nplans++;
    /* The plan's own name: file names repeat across collective folders (4gpu_ll_inplace). */
    const char *name = p->name;
    int reducing = p->collective == PCL_PLAN_COLL_ALLREDUCE ||
                   p->collective == PCL_PLAN_COLL_REDUCESCATTER ||
                   p->collective == PCL_PLAN_COLL_REDUCE;
    int nops = reducing ? a->nops : 1;
    for (int k = 0; k < a->nsizes; k++) /* said once per plan, not per case */
      if (!pcl_plan_size_runnable(p, a->sizes[k]))
        printf("  %s: size %llu skipped: this plan runs %llu .. %llu bytes, split as its chunks "
               "and alignment allow, and not this one\n",
               name, (unsigned long long)a->sizes[k], (unsigned long long)p->min_message_size,
               (unsigned long long)p->max_message_size);
    for (int pk = 0; pk < a->npackets; pk++)
      for (int d = 0; d < a->ndtypes; d++)
        for (int o = 0; o < nops; o++) {
          pcl_sim_opts_t opts = a->base;
          opts.dtype = (ncclDataType_t)a->dtypes[d];
          opts.op = (ncclRedOp_t)(reducing ? a->ops[o] : ncclSum);
          opts.packet = (pcl_sim_packet_t)a->packets[pk];
          if (a->nsizes) {
            opts.sizes = a->sizes;
            opts.nsizes = a->nsizes;
          }
          pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "sim result");
          if (!r)
            return 2;
          ncclResult_t rc = pcl_sim_run(p, &opts, r);
          char sizes[512];
          fmt_sizes(r, sizes, sizeof(sizes));
          int failed =
              rc != ncclSuccess || (r->verdict != PCL_SIM_PASS && r->verdict != PCL_SIM_SKIPPED);
          printf("%-34s %5d  %-8s %-10s %-5s %-9s %s\n", name, p->n_gpus,
                 pcl_dtype_name(opts.dtype), reducing ? pcl_sim_op_name(opts.op) : "-",
                 opts.packet == PCL_SIM_LL8 ? "ll8" : "ll16", pcl_sim_verdict_name(r->verdict),
                 sizes);
          if (failed || (opts.verbose && r->message[0]))
            printf("  %s\n", r->message);
          bad |= failed;
          ncases++;
          npass += !failed && r->verdict == PCL_SIM_PASS;
          nskip += !failed && r->verdict == PCL_SIM_SKIPPED;
          pcl_free(r);
          fflush(stdout);
        }
    pcl_plan_destroy(p);
  }
  printf("total: %d plans simulated (%d refused), %d cases: %d passed, %d skipped, %d failed\n",
         nplans, nrefused, ncases, npass, nskip, ncases - npass - nskip);
  return bad;
}

/* ---- show ------------------------------------------------------------------------------------ */
static const char *chan_short(int t) {
  return t == PCL_PLAN_CHAN_MEMORY   ? "mem"
         : t == PCL_PLAN_CHAN_PORT   ? "port"
         : t == PCL_PLAN_CHAN_SWITCH ? "switch"
                                     : "-";
}

static void print_ref(const pcl_plan_ref_t *r) {
  if (r->kind == PCL_PLAN_REF_LOCAL)
    printf(" %s[%u+%u]", pcl_plan_buf_name(r->type), r->index, r->size);
  else if (r->kind == PCL_PLAN_REF_REMOTE)
    printf(" rank%d.%s[%u+%u]", r->rank, pcl_plan_buf_name(r->type), r->index, r->size);
  else
    printf(" switch%u[%u+%u]", r->slot, r->index, r->size);
}

static void print_op(const pcl_plan_gpu_t *g, const pcl_plan_op_t *op, const char *label) {
  printf("    %-10s %-8s", label, pcl_plan_op_name((pcl_plan_op_type_t)op->type));
  if (op->n_src) {
    printf(" src:");
    for (int i = 0; i < op->n_src; i++)
      print_ref(&op->src[i]);
  }
  if (op->n_dst) {
    printf(" dst:");
    for (int i = 0; i < op->n_dst; i++)
      print_ref(&op->dst[i]);
  }
  if (op->n_channels) {
    printf(" %s:", chan_short(op->channel_type));
    for (int i = 0; i < op->n_channels; i++) {
      int gc = op->gpu_channels[i];
      int peer = (op->channel_type <= PCL_PLAN_CHAN_PORT && gc >= 0 &&
                  gc < g->n_channels[op->channel_type])
                     ? g->channels[op->channel_type][gc].peer
                     : -1;
      printf(" %d->rank%d", gc, peer);
    }
  }
  if (op->reduce_op != PCL_PLAN_RED_NONE) {
    static const char *const red[] = {"sum", "prod", "max", "min", "avg"};
    printf(" reduce:%s", op->reduce_op <= PCL_PLAN_RED_AVG ? red[op->reduce_op] : "?");
  }
  if (op->tbg_size > 1)
    printf(" tbg:%u/%u", op->tbg_id, op->tbg_size);
  if (op->type == PCL_PLAN_OP_BARRIER)
    printf(" id:%d blocks:%u", op->barrier_id, op->num_threadblocks);
  if (op->n_sems) {
    printf(" sems:");
    for (int i = 0; i < op->n_sems; i++)
      printf("%s%u", i ? "," : "", op->sem_ids[i]);
  }
  if (op->type == PCL_PLAN_OP_PIPELINE)
    printf(" unit:%u chunks:%u inner:%u", op->unit_size, op->num_chunks, op->n_inner);
  printf("\n");
}

static int cmd_show(const char *file) {
  pcl_plan_t *p = NULL;
  if (!load(file, &p))
    return 1;
  printf("%s: %s, %s, %d ranks (%d per node), %s, %s, %d threads/block, align %u, "
         "double scratch %s, reuse %s, sizes [%llu, %llu], priority %d\n",
         file, p->name, pcl_plan_coll_name(p->collective), p->n_gpus, p->nranks_per_node,
         p->protocol == PCL_PLAN_PROTO_LL ? "LL" : "Simple",
         p->inplace ? "in-place" : "out-of-place", p->num_threads_per_block, p->buffer_alignment,
         p->use_double_scratch_buffer ? "yes" : "no", p->reuse_resources ? "yes" : "no",
         (unsigned long long)p->min_message_size, (unsigned long long)p->max_message_size,
         p->priority);
  for (int r = 0; r < p->n_gpus; r++) {
    const pcl_plan_gpu_t *g = &p->gpus[r];
    printf("rank %d: chunks i=%u o=%u s=%u", r, g->chunks[0], g->chunks[1], g->chunks[2]);
    for (int t = 0; t < 2; t++)
      for (int c = 0; c < g->n_channels[t]; c++)
        printf(" %s%d->rank%d", chan_short(t), c, g->channels[t][c].peer);
    for (int i = 0; i < g->n_sems; i++)
      printf(" sem%d=%u", i, g->sem_init[i]);
    printf("\n");
    for (int b = 0; b < g->n_blocks; b++) {
      const pcl_plan_block_t *bl = &g->blocks[b];
      printf("  block %d:\n", b);
      int j = 0;
      for (int f = 0; f < bl->n_ops; j++) {
        char label[32];
        snprintf(label, sizeof(label), "ops[%d]", j);
        print_op(g, &bl->ops[f], label);
        if (bl->ops[f].type == PCL_PLAN_OP_PIPELINE) {
          for (int m = 0; m < bl->ops[f].n_inner; m++) {
            snprintf(label, sizeof(label), "  .ops[%d]", m);
            print_op(g, &bl->ops[f + 1 + m], label);
          }
          f += 1 + bl->ops[f].n_inner;
        } else {
          f++;
        }
      }
    }
  }
  pcl_plan_destroy(p);
  return 0;
}

/* ---- dot ------------------------------------------------------------------------------------- */
static int overlaps(const pcl_plan_ref_t *a, const pcl_plan_ref_t *b) {
  return a->type == b->type && a->index < b->index + b->size && b->index < a->index + a->size;
}

static int cmd_dot(const char *file) {
  pcl_plan_t *p = NULL;
  if (!load(file, &p))
    return 1;
  printf("digraph \"%s\" {\n  rankdir=LR;\n  node [shape=box, fontsize=10];\n", p->name);
  for (int r = 0; r < p->n_gpus; r++) {
    const pcl_plan_gpu_t *g = &p->gpus[r];
    printf("  subgraph cluster_r%d {\n    label=\"rank %d\";\n", r, r);
    for (int b = 0; b < g->n_blocks; b++) {
      const pcl_plan_block_t *bl = &g->blocks[b];
      for (int f = 0; f < bl->n_ops; f++) {
        printf("    r%db%do%d [label=\"b%d #%d %s\"];\n", r, b, f, b, f,
               pcl_plan_op_name((pcl_plan_op_type_t)bl->ops[f].type));
        if (f > 0)
          printf("    r%db%do%d -> r%db%do%d [style=dotted];\n", r, b, f - 1, r, b, f);
      }
    }
    printf("  }\n");
  }
  /* Cross-rank edges: remote writes to the owner's ops that read an overlapping range, and
   * signals to the waits on the paired channel. */
  for (int r = 0; r < p->n_gpus; r++) {
    const pcl_plan_gpu_t *g = &p->gpus[r];
    for (int b = 0; b < g->n_blocks; b++)
      for (int f = 0; f < g->blocks[b].n_ops; f++) {
        const pcl_plan_op_t *op = &g->blocks[b].ops[f];
        for (int d = 0; d < op->n_dst; d++) {
          const pcl_plan_ref_t *w = &op->dst[d];
          if (w->kind != PCL_PLAN_REF_REMOTE || w->rank < 0 || w->rank >= p->n_gpus)
            continue;
          const pcl_plan_gpu_t *pg = &p->gpus[w->rank];
          for (int pb = 0; pb < pg->n_blocks; pb++)
            for (int pf = 0; pf < pg->blocks[pb].n_ops; pf++) {
              const pcl_plan_op_t *rd = &pg->blocks[pb].ops[pf];
              for (int s = 0; s < rd->n_src; s++)
                if (rd->src[s].kind == PCL_PLAN_REF_LOCAL && overlaps(w, &rd->src[s])) {
                  printf("  r%db%do%d -> r%db%do%d [color=blue, label=\"%s\"];\n", r, b, f, w->rank,
                         pb, pf, pcl_plan_buf_name(w->type));
                  break;
                }
            }
        }
        int sig = (pcl_plan_ops[op->type].flags & PCL_OPF_SIGNALS) != 0;
        if (!sig || op->channel_type > PCL_PLAN_CHAN_PORT)
          continue;
        for (int c = 0; c < op->n_channels; c++) {
          int gc = op->gpu_channels[c];
          if (gc < 0 || gc >= g->n_channels[op->channel_type])
            continue;
          const pcl_plan_channel_t *ch = &g->channels[op->channel_type][gc];
          const pcl_plan_gpu_t *pg = &p->gpus[ch->peer];
          for (int pb = 0; pb < pg->n_blocks; pb++)
            for (int pf = 0; pf < pg->blocks[pb].n_ops; pf++) {
              const pcl_plan_op_t *wt = &pg->blocks[pb].ops[pf];
              if (!(pcl_plan_ops[wt->type].flags & PCL_OPF_WAITS) ||
                  wt->channel_type != op->channel_type)
                continue;
              for (int wc = 0; wc < wt->n_channels; wc++)
                if (wt->gpu_channels[wc] == ch->peer_channel)
                  printf("  r%db%do%d -> r%db%do%d [color=red, style=dashed];\n", r, b, f, ch->peer,
                         pb, pf);
            }
        }
      }
  }
  printf("}\n");
  pcl_plan_destroy(p);
  return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */
static int parse_list(const char *arg, const char *what, int all_n, int *out, int *n,
                      int (*from_name)(const char *)) {
  if (strcmp(arg, "all") == 0) {
    for (int i = 0; i < all_n; i++)
      out[i] = i;
    *n = all_n;
    return 1;
  }
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", arg);
  *n = 0;
  for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int v = from_name(t);
    if (v < 0 || *n >= all_n) {
      fprintf(stderr, "planccl-plan: unknown %s '%s'\n", what, t);
      return 0;
    }
    out[(*n)++] = v;
  }
  return *n > 0;
}

static int packet_from_name(const char *s) {
  return strcmp(s, "ll16") == 0 ? PCL_SIM_LL16 : strcmp(s, "ll8") == 0 ? PCL_SIM_LL8 : -1;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  sim_args_t *a = pcl_calloc(1, sizeof(*a), "args");
  char **files = pcl_calloc((size_t)argc, sizeof(char *), "args");
  int nfiles = 0, rc = 2;
  if (!a || !files)
    goto out;
  pcl_sim_opts_init(&a->base);
  a->dtypes[0] = ncclFloat32;
  a->ndtypes = 1;
  a->ops[0] = ncclSum;
  a->nops = 1;
  a->packets[0] = PCL_SIM_LL16;
  a->npackets = 1;
  for (int i = 2; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (o[0] != '-') {
      files[nfiles++] = argv[i];
      continue;
    }
    if (strcmp(o, "--any-op") == 0) {
      a->base.call_op_everywhere = 1;
      continue;
    }
    if (strcmp(o, "-v") == 0 || strcmp(o, "--verbose") == 0) {
      a->base.verbose = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "planccl-plan: option %s needs a value\n", o);
      goto out;
    }
    i++;
    if (strcmp(o, "--sizes") == 0) {
      char buf[1024];
      snprintf(buf, sizeof(buf), "%s", v);
      a->nsizes = 0;
      for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (a->nsizes >= PCL_SIM_MAX_SIZES || !parse_size(t, &a->sizes[a->nsizes])) {
          fprintf(stderr, "planccl-plan: bad size '%s' (at most %d sizes)\n", t, PCL_SIM_MAX_SIZES);
          goto out;
        }
        a->nsizes++;
      }
    } else if (strcmp(o, "--max-bytes") == 0) {
      if (!parse_size(v, &a->base.max_bytes)) {
        fprintf(stderr, "planccl-plan: bad size '%s'\n", v);
        goto out;
      }
    } else if (strcmp(o, "--dtype") == 0) {
      if (!parse_list(v, "dtype", ncclNumTypes, a->dtypes, &a->ndtypes, pcl_dtype_from_name))
        goto out;
    } else if (strcmp(o, "--op") == 0) {
      if (!parse_list(v, "op", ncclNumOps, a->ops, &a->nops, pcl_sim_op_from_name))
        goto out;
    } else if (strcmp(o, "--packet") == 0) {
      if (!parse_list(v, "packet", 2, a->packets, &a->npackets, packet_from_name))
        goto out;
    } else if (strcmp(o, "--seeds") == 0 || strcmp(o, "--seed") == 0 || strcmp(o, "--calls") == 0) {
      char *end;
      long x = strtol(v, &end, 10);
      int counted = strcmp(o, "--seed") != 0; /* --seeds and --calls: counts, capped */
      if (*end || x < 0 || (x == 0 && counted) || (counted && x > PCL_PLAN_TOOL_MAX_COUNT)) {
        fprintf(stderr, "planccl-plan: bad value '%s' for %s%s\n", v, o,
                counted ? " (1 .. " PCL_PLAN_TOOL_MAX_COUNT_S ")" : "");
        goto out;
      }
      if (strcmp(o, "--seeds") == 0)
        a->base.nseeds = (int)x;
      else if (strcmp(o, "--seed") == 0)
        a->base.seed = (uint64_t)x;
      else
        a->base.calls_per_size = (int)x;
    } else {
      fprintf(stderr, "planccl-plan: unknown option '%s'\n", o);
      usage(stderr);
      goto out;
    }
  }
  if (nfiles == 0) {
    fprintf(stderr, "planccl-plan: no plan file given\n");
    usage(stderr);
    goto out;
  }
  if (strcmp(cmd, "validate") == 0) {
    rc = cmd_validate(nfiles, files);
  } else if (strcmp(cmd, "tune") == 0) {
    rc = cmd_tune(nfiles, files);
  } else if (strcmp(cmd, "simulate") == 0) {
    rc = cmd_simulate(nfiles, files, a);
  } else if (strcmp(cmd, "show") == 0 || strcmp(cmd, "dot") == 0) {
    if (nfiles != 1) {
      fprintf(stderr, "planccl-plan: %s takes one file\n", cmd);
      goto out;
    }
    rc = strcmp(cmd, "show") == 0 ? cmd_show(files[0]) : cmd_dot(files[0]);
  } else {
    fprintf(stderr, "planccl-plan: unknown command '%s'\n", cmd);
    usage(stderr);
  }
out:
  pcl_free(a);
  pcl_free(files);
  return rc;
}
