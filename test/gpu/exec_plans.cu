/* SPDX-License-Identifier: MIT
 * The executor and kernels on any number of GPUs, one included: every plan of test/data/plans
 * (good, conformance) and plans/ (default and opt-in) runs with its ranks as threads of one
 * process, rank r on GPU r % ngpus (peers on one GPU use plain pointers), multi-node plans with
 * their ranks grouped into emulated hosts (port channels over TCP between hosts). Every output
 * must equal the CPU simulator's for the same inputs, bit for bit (exec_sweep.cu); one plan of
 * every kind also runs under CUDA graphs. With a GPU per rank the ranks also run as processes.
 * Usage: exec_plans [--only thread|proc] [--quick] [--port-kind ce|tcp] [--port-only]
 *   [--filter a,=b,..] (names containing a, or exactly b) [--ranks 2,4,8] [--max-bytes N]
 *   [--scratch-bytes N] (each rank's scratch, default 64 MiB: smaller runs staged calls in
 * segments) [--first-flag N] (the communicators start as if N calls had run: 0xffffffff makes
 * the first call the one whose 32-bit packet flag wraps)
 *   [--no-graph] [--no-faults] [--no-latency] [--soak N] (N checked mixed calls per group, and
 *   nothing else)
 * Exits 77 without a GPU; prints one summary row per plan and "N passed, N failed" last. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include "exec_plans.h"
#include "kernels.h" /* pcl_kernels_pdl */
#include "transport.h"
extern "C" {
#include "plan.h"
}

#define XP_MAX_FILES 256
#define XP_MAX_GROUPS 8

xp_opts_t xp_opts = {0, PCL_TRANSPORT_CE, 0, 0, 0, 0, 0, XP_DEFAULT_MSG, NULL, 0, 0};

static int name_selected(const char *name) {
  if (xp_opts.filter == NULL)
    return 1;
  const char *f = xp_opts.filter;
  while (*f) {
    size_t n = strcspn(f, ",");
    if (*f == '=') { /* "=name": that name exactly */
      if (n - 1 == strlen(name) && strncmp(f + 1, name, n - 1) == 0)
        return 1;
    } else {
      for (const char *h = name; n > 0 && *h; h++)
        if (strncmp(h, f, n) == 0)
          return 1;
    }
    f += n + (f[n] == ',');
  }
  return 0;
}

static char g_files[XP_MAX_FILES][512];
static int g_nfiles;

static void add_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  static char names[XP_MAX_FILES][256];
  int n = 0;
  while ((e = readdir(d)) != NULL && n < XP_MAX_FILES) {
    size_t l = strlen(e->d_name);
    if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0)
      snprintf(names[n++], 256, "%s", e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
  for (int i = 0; i < n && g_nfiles < XP_MAX_FILES; i++)
    if (snprintf(g_files[g_nfiles], 512, "%s/%s", dir, names[i]) < 512) /* skip long paths */
      g_nfiles++;
}

static int gpu_count(void) {
  /* In a child, so the parent never initialises CUDA before forking the ranks. */
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
      n = 0;
    _exit(n > 100 ? 100 : n);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

static void *shared_alloc(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("exec_plans: mmap");
    return NULL;
  }
  memset(p, 0, bytes);
  return p;
}

static int ref_init(xp_ref_t *x, uint64_t cap) {
  x->cap = cap;
  for (int r = 0; r < XP_MAXR; r++) {
    x->in[r] = (uint8_t *)shared_alloc(cap);
    x->want[r] = (uint8_t *)shared_alloc(cap);
    if (x->in[r] == NULL || x->want[r] == NULL)
      return 1;
  }
  return 0;
}

typedef struct {
  xp_group_t *g;
  int rank, rc;
} targ_t;

static void *thread_main(void *p) {
  targ_t *t = (targ_t *)p;
  t->rc = xp_rank_main(t->g, t->rank);
  return NULL;
}

static int run_group(xp_group_t *g) {
  int failed = 0;
  if (pcl_bootstrap_root_create(&g->handle) != ncclSuccess)
    return 1;
  if (g->mode == 0) {
    pthread_t th[XP_MAXR];
    targ_t ta[XP_MAXR];
    for (int r = 0; r < g->nranks; r++) {
      ta[r] = (targ_t){g, r, 0};
      pthread_create(&th[r], NULL, thread_main, &ta[r]);
    }
    for (int r = 0; r < g->nranks; r++) {
      pthread_join(th[r], NULL);
      failed |= ta[r].rc != 0;
    }
  } else {
    pid_t pid[XP_MAXR];
    for (int r = 0; r < g->nranks; r++) {
      pid[r] = fork();
      if (pid[r] == 0)
        _exit(xp_rank_main(g, r) ? 1 : 0);
    }
    for (int r = 0; r < g->nranks; r++) {
      int st = 0;
      waitpid(pid[r], &st, 0);
      failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
  }
  return failed;
}

/* One row per plan; returns the number of failed checks. */
static int summarise(const xp_group_t *g, int *passed, int *failed, int *skipped) {
  const char *mode = g->mode ? "proc" : "thread";
  const xp_rank_res_t *r0 = &g->res[0];
  int bad = 0;
  for (int p = 0; p < r0->nplans; p++) {
    int cases = 0, fail = 0;
    const char *first = "";
    for (int r = 0; r < g->nranks; r++) {
      cases += g->res[r].plan[p].cases;
      fail += g->res[r].plan[p].fail;
      if (!first[0])
        first = g->res[r].plan[p].first_fail;
    }
    const xp_plan_res_t *pr = &r0->plan[p];
    int simrej = pr->simrej > 0 && fail == 0;
    const char *st = pr->refused           ? "refused"
                     : simrej              ? "sim-rejects"
                     : fail || pr->note[0] ? "FAIL"
                                           : "ok";
    printf("%-6s %5d %4d  %-32s %7d %6d  %s", mode, g->nranks, g->rpn, pr->name, cases, fail, st);
    if (pr->segmented)
      printf(" (%d in segments)", pr->segmented);
    printf("\n");
    if (pr->note[0])
      printf("         %s\n", pr->note);
    if (first[0])
      printf("         first failure: %s\n", first);
    if (pr->refused || simrej)
      (*skipped)++;
    else if (fail || pr->note[0])
      (*failed)++, bad++;
    else
      (*passed)++;
  }
  for (int k = 0; k < XP_NKINDS; k++) {
    int v = 1;
    for (int r = 0; r < g->nranks; r++)
      v = g->res[r].graph[k] < 0 ? -1 : v > 0 && g->res[r].graph[k] == 0 ? 0 : v;
    if (v == 0)
      continue;
    printf("%-6s %5d %4d  graph x%d: %-12s %-30s %s\n", mode, g->nranks, g->rpn, XP_GRAPH_REPLAYS,
           xp_kind_names[k], r0->graph_plan[k], v > 0 ? "ok" : "FAIL");
    v > 0 ? (*passed)++ : ((*failed)++, bad++);
  }
  static const char *const alt_name[XP_ALT_MODES] = {"plans alternating back to back",
                                                     "two communicators interleaved",
                                                     "plans alternating in one CUDA graph"};
  for (int t = 0; t < XP_ALT_MODES; t++) {
    int v = 1;
    for (int r = 0; r < g->nranks; r++) {
      int x = g->res[r].alt[t];
      v = x < 0 ? -1 : v > 0 && x == 0 ? 0 : v;
    }
    if (v == 0) {
      if (t == XP_ALT_TWO && r0->alt[XP_ALT_EAGER] != 0)
        printf("%-6s %5d %4d  %-45s %s\n", mode, g->nranks, g->rpn, alt_name[t],
               "not run: two communicators' grids do not fit on the GPU at once");
      continue;
    }
    char what[96];
    snprintf(what, sizeof(what), "%s", alt_name[t]);
    if (t == XP_ALT_GRAPH && pcl_kernels_pdl())
      snprintf(what, sizeof(what), "%s (%d PDL edges)", alt_name[t], r0->alt_pdl_edges);
    printf("%-6s %5d %4d  %-45s %s\n", mode, g->nranks, g->rpn, what, v > 0 ? "ok" : "FAIL");
    v > 0 ? (*passed)++ : ((*failed)++, bad++);
  }
  int cv = 1;
  for (int r = 0; r < g->nranks; r++)
    cv = g->res[r].cores < 0 ? -1 : cv > 0 && g->res[r].cores == 0 ? 0 : cv;
  if (cv != 0) {
    printf("%-6s %5d %4d  %-45s %s\n", mode, g->nranks, g->rpn,
           "a plan too large to be co-resident refused", cv > 0 ? "ok" : "FAIL");
    cv > 0 ? (*passed)++ : ((*failed)++, bad++);
  }
  for (int k = 0; k < r0->nfaults; k++) {
    int v = 1, none = 1; /* none: every rank said it had nothing to run (ok == 0) */
    for (int r = 0; r < g->nranks; r++) {
      v &= g->res[r].nfaults > k && g->res[r].fault[k].ok > 0;
      none &= g->res[r].nfaults > k && g->res[r].fault[k].ok == 0;
    }
    char what[80];
    snprintf(what, sizeof(what), "fault: %s", r0->fault[k].name);
    if (none) {
      printf("%-6s %5d %4d  %-45s not run: %s\n", mode, g->nranks, g->rpn, what,
             r0->fault[k].detail);
      (*skipped)++;
      continue;
    }
    printf("%-6s %5d %4d  %-45s %s", mode, g->nranks, g->rpn, what, v ? "ok" : "FAIL");
    if (r0->fault[k].secs > 0)
      printf(" (stopped in %.2f s)", r0->fault[k].secs);
    printf("\n");
    int measured = strstr(r0->fault[k].name, "cycles") != NULL || xp_opts.soak > 0;
    if ((!v || measured) && r0->fault[k].detail[0])
      printf("         %s\n", r0->fault[k].detail);
    v ? (*passed)++ : ((*failed)++, bad++);
  }
  for (int r = 0; r < g->nranks; r++) {
    if (g->res[r].first_fail[0])
      printf("         rank %d: %s\n", r, g->res[r].first_fail);
    if (g->res[r].rc != 0) {
      printf("%-6s %5d %4d  rank %d: the harness failed (see its messages above)\n", mode,
             g->nranks, g->rpn, r);
      (*failed)++, bad++;
    }
  }
  if (g->rpn == g->nranks && xp_opts.soak <= 0 && !xp_opts.no_latency)
    printf("%-6s %5d %4d  latency under graphs, us/call: LL allreduce 1 KB %.2f, nop 1x32 %.2f, "
           "nop 8x512 %.2f\n",
           mode, g->nranks, g->rpn, r0->lat_ll_1k, r0->lat_nop1, r0->lat_nop8);
  return bad;
}

static int parse(int argc, char **argv, const char **only, const char **ranks) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--only") && i + 1 < argc)
      *only = argv[++i];
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
      *ranks = argv[++i];
    else if (!strcmp(argv[i], "--port-kind") && i + 1 < argc) {
      const char *k = argv[++i];
      if (strcmp(k, "ce") && strcmp(k, "tcp")) {
        fprintf(stderr, "exec_plans: --port-kind takes ce or tcp, not '%s'\n", k);
        return 1;
      }
      xp_opts.port_kind = strcmp(k, "tcp") ? PCL_TRANSPORT_CE : PCL_TRANSPORT_TCP;
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
      xp_opts.max_msg = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--scratch-bytes") && i + 1 < argc)
      xp_opts.scratch_bytes = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--first-flag") && i + 1 < argc)
      xp_opts.first_flag = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      xp_opts.filter = argv[++i];
    else if (!strcmp(argv[i], "--port-only"))
      xp_opts.port_only = 1;
    else if (!strcmp(argv[i], "--quick"))
      xp_opts.quick = 1;
    else if (!strcmp(argv[i], "--no-graph"))
      xp_opts.no_graph = 1;
    else if (!strcmp(argv[i], "--no-faults"))
      xp_opts.no_faults = 1;
    else if (!strcmp(argv[i], "--no-latency"))
      xp_opts.no_latency = 1;
    else if (!strcmp(argv[i], "--soak") && i + 1 < argc) {
      xp_opts.soak = strtol(argv[++i], NULL, 0);
      if (xp_opts.soak <= 0) {
        fprintf(stderr, "exec_plans: --soak takes a positive call count\n");
        return 1;
      }
    } else {
      fprintf(stderr, "exec_plans: unknown argument '%s'\n", argv[i]);
      return 1;
    }
  }
  if (xp_opts.max_msg > XP_MAX_MSG)
    xp_opts.max_msg = XP_MAX_MSG;
  return 0;
}

int main(int argc, char **argv) {
  const char *only = NULL, *ranks = NULL;
  if (parse(argc, argv, &only, &ranks))
    return 2;
  /* Up to 8 ranks share a GPU here, each with two streams of spinning kernels, a side stream and
   * the port channels' copy streams: beyond the 8 hardware queues CUDA gives a process by default,
   * streams share queues and a kernel can wait behind one that spins on it. (Before any CUDA
   * call; the forked ranks inherit it.) */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  xp_opts.ngpus = gpu_count();
  if (xp_opts.ngpus < 1) {
    printf("exec_plans: no GPU, skipped\n");
    return 77;
  }
  const char *src = getenv("PCL_SOURCE_DIR");
  static const char *const dirs[] = {"test/data/plans/good",  "test/data/plans/conformance",
                                     "plans/allreduce",       "plans/allgather",
                                     "plans/reducescatter",   "plans/extra/allreduce",
                                     "plans/extra/allgather", "plans/extra/reducescatter",
                                     "plans/extra/broadcast", "plans/extra/reduce"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    char dir[700];
    snprintf(dir, sizeof(dir), "%s/%s", src ? src : ".", dirs[i]);
    add_dir(dir);
  }
  /* Groups by (ranks, ranks per host), in this order: single hosts by size, then multi-node. */
  static xp_group_t groups[XP_MAX_GROUPS];
  int ng = 0;
  for (int f = 0; f < g_nfiles; f++) {
    char err[512];
    pcl_plan_t *p = NULL;
    if (pcl_plan_load(g_files[f], &p, err, sizeof(err)) != ncclSuccess)
      continue; /* the refused conformance plans (NVLS) */
    int keep = p->n_gpus <= XP_MAXR && name_selected(p->name);
    if (ranks != NULL) {
      char want[8];
      snprintf(want, sizeof(want), "%d", p->n_gpus);
      keep &= strstr(ranks, want) != NULL;
    }
    if (xp_opts.port_only) {
      int port = 0;
      for (int r = 0; r < p->n_gpus; r++)
        port |= p->gpus[r].n_channels[PCL_PLAN_CHAN_PORT] > 0;
      keep &= port;
    }
    int gi = 0;
    while (keep && gi < ng &&
           !(groups[gi].nranks == p->n_gpus && groups[gi].rpn == p->nranks_per_node))
      gi++;
    if (keep && gi == ng && ng < XP_MAX_GROUPS) {
      groups[ng].nranks = p->n_gpus;
      groups[ng].rpn = p->nranks_per_node;
      ng++;
    }
    if (keep && gi < ng && groups[gi].npaths < XP_MAX_PLANS)
      xp_copy(groups[gi].paths[groups[gi].npaths++], 512, g_files[f]);
    pcl_plan_destroy(p);
  }
  for (int i = 0; i < ng; i++) /* stable order: by (multi-node last, ranks, ranks per host) */
    for (int j = i + 1; j < ng; j++) {
      long ki =
          (groups[i].rpn != groups[i].nranks) * 10000 + groups[i].nranks * 100 + groups[i].rpn;
      long kj =
          (groups[j].rpn != groups[j].nranks) * 10000 + groups[j].nranks * 100 + groups[j].rpn;
      if (kj < ki) {
        xp_group_t t = groups[i];
        groups[i] = groups[j];
        groups[j] = t;
      }
    }
  xp_ref_t *ref = (xp_ref_t *)shared_alloc(sizeof(xp_ref_t) * (1 + XP_ALT_CALLS));
  if (ref == NULL || ref_init(&ref[0], XP_BUF_BYTES))
    return 1;
  for (int i = 1; i <= XP_ALT_CALLS; i++)
    if (ref_init(&ref[i], XP_ALT_MAX))
      return 1;
  printf("exec_plans: %d GPU(s), %d plan files, %d groups%s\n", xp_opts.ngpus, g_nfiles, ng,
         xp_opts.quick ? " (quick)" : "");
  /* Processes first in each group: the parent never initialises CUDA, so it can fork. */
  int rows = 0, failed_any = 0, passed = 0, failed = 0, skipped = 0;
  static xp_group_t runs[2 * XP_MAX_GROUPS];
  for (int gi = 0; gi < ng; gi++)
    for (int mode = 1; mode >= 0; mode--) {
      if ((only && strcmp(only, mode ? "proc" : "thread")) ||
          (mode == 1 && xp_opts.ngpus < groups[gi].nranks)) /* a spinning GPU per process */
        continue;
      xp_group_t *g = &runs[rows++];
      *g = groups[gi];
      g->mode = mode;
      g->dev_ranks = (g->nranks + xp_opts.ngpus - 1) / xp_opts.ngpus;
      g->ref = &ref[0];
      g->alt_ref = &ref[1];
      g->res = (xp_rank_res_t *)shared_alloc(sizeof(xp_rank_res_t) * XP_MAXR);
      if (g->res == NULL)
        return 1;
      printf("== %d ranks, %d per host, as %s, %d rank(s) per GPU: %d plans\n", g->nranks, g->rpn,
             mode ? "processes" : "threads", g->dev_ranks, g->npaths);
      fflush(stdout);
      failed_any |= run_group(g);
    }
  printf("\n%-6s %5s %4s  %-32s %7s %6s  %s\n", "mode", "ranks", "host", "plan", "cases", "fails",
         "result");
  for (int i = 0; i < rows; i++)
    failed_any |= summarise(&runs[i], &passed, &failed, &skipped) != 0;
  printf("(cases: summed over ranks; every output compared bit for bit with the CPU simulator's; "
         "refused: the executor would not launch it, see the note)\n");
  printf("exec_plans: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed_any || failed ? 1 : 0;
}
