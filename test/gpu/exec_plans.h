/* SPDX-License-Identifier: MIT
 * Shared declarations of the exec_plans GPU test: run options, the groups of ranks it runs (one
 * per rank count and ranks per emulated host), and the result rows the ranks fill. */
#ifndef PCL_EXEC_PLANS_H
#define PCL_EXEC_PLANS_H

#include <stdint.h>
#include <string.h>
#include "bootstrap.h"

#define XP_MAXR 8                   /* ranks of the largest group */
#define XP_MAX_PLANS 64             /* plans of one group */
#define XP_DEFAULT_MSG (1ull << 20) /* largest message of the case sweep by default */
#define XP_MAX_MSG (8ull << 20)     /* --max-bytes at most (segmented calls need a few MiB) */
#define XP_BUF_BYTES (16ull << 20)  /* device buffer per rank and direction (>= any out_bytes) */
#define XP_ALT_CALLS 8              /* back-to-back calls of the alternation test */
enum { XP_ALT_EAGER, XP_ALT_TWO, XP_ALT_GRAPH, XP_ALT_MODES };
#define XP_ALT_MAX (128ull << 10) /* their largest message */
#define XP_GRAPH_REPLAYS 50
#define XP_MAX_FAULTS 8 /* kernel-fault scenarios */

/* Plan kinds that each get one plan tested under CUDA graphs. */
enum {
  XP_KIND_LL,
  XP_KIND_SIMPLE,
  XP_KIND_SEM,
  XP_KIND_BARRIER,
  XP_KIND_PORT,
  XP_KIND_PIPELINE,
  XP_KIND_TBG,
  XP_KIND_ZEROCOPY,
  XP_NKINDS
};
extern const char *const xp_kind_names[XP_NKINDS];

typedef struct {
  int quick;
  int port_kind; /* pcl_transport_kind_t inside an emulated host: CE or TCP */
  int port_only;
  int no_graph;
  int no_faults;  /* skip the kernel-fault scenarios (exec_faults.cu) */
  int no_latency; /* skip the graph latency (slow under compute-sanitizer) */
  long soak;      /* > 0: each group runs only this many mixed checked calls (exec_soak.cu) */
  uint64_t max_msg;
  const char *filter; /* comma-separated substrings of plan names; NULL = every plan */
  int ngpus;
  /* Each rank's scratch (--scratch-bytes; 0: 64 MiB). Smaller makes staged calls run in
   * segments (executor/exec/exec_segment.c). */
  uint64_t scratch_bytes;
  uint64_t
      first_flag; /* --first-flag: every context's flag slots start there (pcl_exec_config_t) */
} xp_opts_t;
extern xp_opts_t xp_opts;

/* One plan's results on one rank. */
typedef struct {
  char name[64];
  int cases, pass, fail, skip, refused;
  int simrej;           /* cases whose plan the simulator rejects (conformance plans only) */
  int segmented;        /* cases run as several calls (pcl_exec_segments) */
  char note[240];       /* why it was refused or stopped */
  char first_fail[400]; /* the first wrong case */
} xp_plan_res_t;

typedef struct {
  int ran, rc, nplans;
  int graph[XP_NKINDS]; /* 1 ok, -1 failed, 0 no plan of that kind */
  char graph_plan[XP_NKINDS][64];
  /* Back-to-back calls (xs_run_alternating), [XP_ALT_EAGER] alternating plans, [XP_ALT_TWO]
   * over two communicators, [XP_ALT_GRAPH] alternating in one CUDA graph: 1 ok, -1 failed, 0
   * not run. alt_pdl_edges: programmatic edges in that graph (PLANCCL_PDL=1 makes them). */
  int alt[XP_ALT_MODES];
  int alt_pdl_edges;
  int cores; /* the co-residency check: 1 ok, -1 failed, 0 not run */
  double lat_ll_1k, lat_nop1, lat_nop8;
  int nfaults; /* kernel-fault scenarios run (exec_faults.cu) */
  struct {
    char name[64];
    int ok;           /* 1 ok, -1 failed */
    double secs;      /* rank 0: from launch (or abort) to the stream's end */
    char detail[400]; /* rank 0: the hang report, or the failure */
  } fault[XP_MAX_FAULTS];
  char first_fail[400];
  xp_plan_res_t plan[XP_MAX_PLANS];
} xp_rank_res_t;

/* Everything one case needs from the simulator, shared by the ranks (MAP_SHARED: processes). */
typedef struct {
  int verdict; /* pcl_sim_verdict_t of the reference run */
  char msg[512];
  uint64_t in_bytes, out_bytes;
  uint64_t cap; /* bytes of each in[] / want[] buffer */
  int seen[XP_MAXR];
  uint8_t *in[XP_MAXR], *want[XP_MAXR]; /* cap bytes each */
} xp_ref_t;

typedef struct {
  int nranks, rpn; /* ranks, ranks per emulated host */
  int mode;        /* 0 threads, 1 processes */
  int dev_ranks;   /* most ranks on one GPU */
  pcl_bootstrap_handle_t handle;
  char paths[XP_MAX_PLANS][512];
  int npaths;
  xp_ref_t *ref;      /* one case's reference (rank 0 writes it) */
  xp_ref_t *alt_ref;  /* [XP_ALT_CALLS] */
  xp_rank_res_t *res; /* [nranks] */
} xp_group_t;

/* strncpy that always terminates (and never trips -Wformat-truncation). */
static inline void xp_copy(char *dst, size_t n, const char *src) {
  size_t l = strlen(src);
  if (l >= n)
    l = n - 1;
  memcpy(dst, src, l);
  dst[l] = '\0';
}

/* One rank of a group: returns 0 when it ran to the end (failures are in res). */
int xp_rank_main(xp_group_t *g, int rank);

#endif
