/* SPDX-License-Identifier: MIT
 * planccl-bench: loads NCCL-compatible libraries (planccl, the real NCCL, NCCL with symmetric
 * windows, others) and measures them side by side in one run, nccl-tests style (docs/bench.md). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench_run.h"

typedef struct {
  bench_opts_t o;
  bench_lib_t libs[BENCH_MAX_LIBS];
  const char *label[BENCH_MAX_LIBS]; /* NULL once the library failed: not run again */
  int opened[BENCH_MAX_LIBS];
  char log[BENCH_MAX_LIBS][96]; /* planccl's path log per library; "" when not asked for */
  bench_result_t best[BENCH_MAX_LIBS], run;
  bench_hostpath_t host[BENCH_MAX_LIBS], host_run, floors;
} bench_t;

/* Fills the paths of `run` from library l's log. */
static void read_paths(bench_t *b, int l) {
  const bench_opts_t *o = &b->o;
  for (int ci = 0; ci < o->ncolls; ci++)
    for (int s = 0; s < o->nsizes; s++) {
      bench_case_t k;
      if (bench_case(o->colls[ci], o->dtype, o->op, o->ngpus, o->root, o->sizes[s], &k) != 0)
        continue;
      for (int p = 0; p < BENCH_PLACES; p++)
        bench_path_of(b->log[l], k.coll, bench_path_bytes(&k), p == BENCH_IN,
                      b->run.path[k.coll][s][p], BENCH_PATH_LEN);
    }
}

/* Opens library l on its first run, its path log asked for first (planccl reads its
 * environment once); the proc model's children open their own. 0, or -1 with one line. */
static int open_lib(bench_t *b, int l) {
  char err[512];
  if (b->opened[l] || b->o.model == BENCH_MODEL_PROC)
    return 0;
  if (b->log[l][0])
    bench_path_log_env(b->log[l]);
  if (bench_lib_open(&b->libs[l], b->o.libs[l].path, b->o.libs[l].symm, err, sizeof(err)) != 0) {
    fprintf(stderr, "planccl-bench: %s: %s; not measured\n", b->o.libs[l].label, err);
    return -1;
  }
  b->opened[l] = 1;
  return 0;
}

static int run_one(bench_t *b, int l, int rep, bench_result_t *ranks, int *done) {
  const bench_opts_t *o = &b->o;
  static double start;
  if (start == 0)
    start = bench_now_us();
  int places = (o->places & BENCH_PLACE_OUT ? 1 : 0) + (o->places & BENCH_PLACE_IN ? 1 : 0);
  bench_job_t job = {.o = o,
                     .l = l,
                     .lib = &b->libs[l],
                     .env_log = b->log[l][0] ? b->log[l] : NULL,
                     .ranks = ranks,
                     .host = &b->host_run,
                     .done = done,
                     .total = o->repeat * o->nlibs * places * o->ncolls * o->nsizes,
                     .start_us = start};
  if (open_lib(b, l) != 0 || bench_run_lib(&job) != 0) {
    if (b->opened[l] || o->model == BENCH_MODEL_PROC)
      fprintf(stderr, "planccl-bench: %s failed; not measured\n", o->libs[l].label);
    return -1;
  }
  bench_result_from_ranks(&b->run, ranks, o->ngpus);
  read_paths(b, l);
  bench_result_merge(&b->best[l], &b->run);
  if (o->hostpath)
    bench_hostpath_merge(&b->host[l], &b->floors, &b->host_run, rep == 0);
  return 0;
}

static void print_results(bench_t *b) {
  const bench_opts_t *o = &b->o;
  int any_path = 0;
  for (int ci = 0; ci < o->ncolls; ci++)
    for (int l = 0; l < o->nlibs; l++)
      if (b->label[l]) {
        bench_write_table(stdout, o, b->best, l, ci);
        for (int s = 0; s < o->nsizes; s++)
          any_path |=
              b->best[l].path[o->colls[ci]][s][0][0] | b->best[l].path[o->colls[ci]][s][1][0];
      }
  if (o->hostpath) {
    bench_case_t k;
    char path[BENCH_PATH_LEN] = "";
    if (bench_case(o->colls[0], o->dtype, o->op, o->ngpus, o->root, o->sizes[0], &k) == 0)
      for (int l = 0; l < o->nlibs && !path[0]; l++)
        if (b->label[l])
          snprintf(path, sizeof(path), "%s", b->best[l].path[k.coll][0][BENCH_OUT]);
    bench_hostpath_print(stdout, bench_coll_name(o->colls[0]), o->sizes[0], bench_hostpath_step(o),
                         path, b->label, b->host, o->nlibs, &b->floors);
  }
  if (any_path)
    printf("# path: what planccl ran (plan:NAME = its own kernel, nccl = forwarded; "
           "out|in when the placements differ)\n");
}

static int write_csv(bench_t *b) {
  FILE *f = fopen(b->o.csv, "w");
  if (f == NULL) {
    perror(b->o.csv);
    return -1;
  }
  bench_write_csv(f, &b->o, b->best);
  if (fclose(f) != 0) {
    perror(b->o.csv);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  static bench_t b;
  char err[256];
  int rc = 0, parsed = bench_parse_args(argc, argv, &b.o, err, sizeof(err));
  bench_result_t *ranks = NULL;
  int *done = NULL;
  if (parsed != 0) {
    if (parsed < 0)
      fprintf(stderr, "planccl-bench: %s\n", err);
    bench_usage(parsed < 0 ? stderr : stdout);
    return parsed < 0 ? 2 : 0;
  }
  const bench_opts_t *o = &b.o;
  int ndev = bench_gpu_count(o->model == BENCH_MODEL_PROC);
  if (ndev < (o->share_gpu ? 1 : o->ngpus)) {
    fprintf(stderr, "planccl-bench: needs %d GPUs, found %d\n", o->ngpus, ndev < 0 ? 0 : ndev);
    return 77;
  }
  ranks = bench_shm_alloc(sizeof(bench_result_t) * (size_t)o->ngpus);
  done = bench_shm_alloc(sizeof(int));
  if (ranks == NULL || done == NULL) {
    fprintf(stderr, "planccl-bench: out of memory\n");
    rc = 1;
    goto out;
  }
  for (int l = 0; l < o->nlibs; l++) {
    b.label[l] = o->libs[l].label;
    bench_result_clear(&b.best[l]);
    if (getenv("PLANCCL_DEBUG") == NULL) {
      snprintf(b.log[l], sizeof(b.log[l]), "/tmp/planccl-bench-%d-%d.log", (int)getpid(), l);
      unlink(b.log[l]);
    }
  }
  /* Each library runs `repeat` times in alternating order (A B C, then C B A) and keeps its best
   * time per cell: whichever runs first in a process pays for warming up the host. */
  for (int rep = 0; rep < o->repeat; rep++)
    for (int i = 0; i < o->nlibs; i++) {
      int l = rep % 2 ? o->nlibs - 1 - i : i;
      if (b.label[l] && run_one(&b, l, rep, ranks, done) != 0) {
        b.label[l] = NULL;
        b.best[l].measured = 0;
        rc = 1;
      }
    }
  print_results(&b);
  if (o->csv && write_csv(&b) != 0)
    rc = 1;
  long long wrong = bench_total_wrong(o, b.best);
  if (wrong) {
    fprintf(stderr, "planccl-bench: %lld wrong elements (the #wrong columns)\n", wrong);
    rc = 1;
  }
out:
  for (int l = 0; l < o->nlibs; l++)
    if (b.log[l][0])
      unlink(b.log[l]);
  bench_shm_free(ranks, sizeof(bench_result_t) * (size_t)o->ngpus);
  bench_shm_free(done, sizeof(int));
  return rc;
}
