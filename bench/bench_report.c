/* SPDX-License-Identifier: MIT
 * planccl-bench's writers (bench_report.h): the per-library tables, the CSV, the progress line,
 * and the lookup of planccl's "pcl_path" log lines. No CUDA here: the unit tests drive it. */
#include "bench_report.h"
#include <string.h>

const char bench_csv_header[] = "lib,coll,model,ngpus,bytes,count,type,redop,root,place,mode,"
                                "time_us,algbw_gbs,busbw_gbs,wrong,speedup,path";

void bench_result_clear(bench_result_t *r) {
  memset(r, 0, sizeof(*r));
  for (int c = 0; c < BENCH_COLL_COUNT; c++)
    for (int s = 0; s < BENCH_MAX_SIZES; s++)
      for (int p = 0; p < BENCH_PLACES; p++)
        for (int m = 0; m < BENCH_MODES; m++)
          r->us[c][s][p][m] = -1;
}

void bench_result_merge(bench_result_t *best, const bench_result_t *run) {
  for (int c = 0; c < BENCH_COLL_COUNT; c++)
    for (int s = 0; s < BENCH_MAX_SIZES; s++)
      for (int p = 0; p < BENCH_PLACES; p++) {
        for (int m = 0; m < BENCH_MODES; m++) {
          double t = run->us[c][s][p][m], *b = &best->us[c][s][p][m];
          if (t >= 0 && (*b < 0 || t < *b))
            *b = t;
          best->wrong[c][s][p][m] += run->wrong[c][s][p][m];
        }
        if (run->path[c][s][p][0])
          memcpy(best->path[c][s][p], run->path[c][s][p], BENCH_PATH_LEN);
      }
  best->measured |= run->measured;
}

void bench_result_from_ranks(bench_result_t *out, const bench_result_t *ranks, int n) {
  bench_result_clear(out);
  for (int c = 0; c < BENCH_COLL_COUNT; c++)
    for (int s = 0; s < BENCH_MAX_SIZES; s++)
      for (int p = 0; p < BENCH_PLACES; p++)
        for (int m = 0; m < BENCH_MODES; m++) {
          double t = ranks[0].us[c][s][p][m];
          long long w = 0;
          for (int r = 0; r < n; r++) {
            double tr = ranks[r].us[c][s][p][m];
            t = tr < 0 || t < 0 ? -1 : (tr > t ? tr : t);
            w += ranks[r].wrong[c][s][p][m];
          }
          out->us[c][s][p][m] = t;
          out->wrong[c][s][p][m] = w;
        }
  out->measured = 1;
}

/* The speedup of library l over the baseline for one cell; < 0 when there is none. */
static double speedup(const bench_opts_t *o, const bench_result_t *res, int l, int c, int s, int p,
                      int m) {
  const bench_result_t *b = &res[o->baseline];
  if (l == o->baseline || !b->measured)
    return -1;
  double tb = b->us[c][s][p][m], tl = res[l].us[c][s][p][m];
  return tb > 0 && tl > 0 ? tb / tl : -1;
}

static void cell(FILE *f, int width, int prec, double v) {
  if (v < 0)
    fprintf(f, " %*s", width, "-");
  else
    fprintf(f, " %*.*f", width, prec, v);
}

void bench_fmt_size(size_t b, char *buf, size_t n) {
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    snprintf(buf, n, "%zuG", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    snprintf(buf, n, "%zuM", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    snprintf(buf, n, "%zuK", b >> 10);
  else
    snprintf(buf, n, "%zu", b);
}

void bench_write_table(FILE *f, const bench_opts_t *o, const bench_result_t *res, int l, int ci) {
  bench_coll_t c = o->colls[ci];
  const bench_lib_spec_t *lib = &o->libs[l];
  int spd = l != o->baseline && res[o->baseline].measured, has_path = 0;
  for (int s = 0; s < o->nsizes; s++)
    has_path |= res[l].path[c][s][0][0] || res[l].path[c][s][1][0];
  fprintf(f, "\n# %s%s: %s, %s %s, %d GPUs, model %s; time in us, algbw and busbw in GB/s",
          lib->label, lib->symm ? " (symmetric windows)" : "", bench_coll_name(c),
          bench_dtype_name(o->dtype), bench_coll_has_op(c) ? bench_op_name(o->op) : "", o->ngpus,
          bench_model_name(o->model));
  fprintf(f, "; g = CUDA graph of %d calls", o->graph_iters);
  if (spd)
    fprintf(f, "; x%s = %s's time / this time", o->libs[o->baseline].label,
            o->libs[o->baseline].label);
  /* The placement names over their column groups (51 characters, 65 with the speedups). */
  fprintf(f, "\n#%45s", "");
  int width = 51 + (spd ? 14 : 0), both = o->places == (BENCH_PLACE_OUT | BENCH_PLACE_IN);
  if (o->places & BENCH_PLACE_OUT)
    fprintf(f, " %-*s", both ? width - 1 : 0, "out-of-place");
  if (o->places & BENCH_PLACE_IN)
    fprintf(f, " %s", "in-place");
  fprintf(f, "\n# %10s %12s %8s %6s %4s", "size", "count", "type", "redop", "root");
  for (int p = 0; p < BENCH_PLACES; p++) {
    if (!(o->places & (1 << p)))
      continue;
    fprintf(f, " %9s %7s %7s %9s %7s %6s", "time", "algbw", "busbw", "gtime", "gbusbw", "#wrong");
    if (spd)
      fprintf(f, " %6s %6s", "xbase", "gxbase");
  }
  fprintf(f, "%s\n", has_path ? "  path" : "");
  double factor = bench_busbw_factor(c, o->ngpus);
  for (int s = 0; s < o->nsizes; s++) {
    bench_case_t k;
    if (bench_case(c, o->dtype, o->op, o->ngpus, o->root, o->sizes[s], &k) != 0)
      continue;
    fprintf(f, "  %10zu %12zu %8s %6s %4d", k.bytes, k.count, bench_dtype_name(o->dtype),
            bench_coll_has_op(c) ? bench_op_name(o->op) : "none",
            bench_coll_has_root(c) ? o->root : -1);
    for (int p = 0; p < BENCH_PLACES; p++) {
      if (!(o->places & (1 << p)))
        continue;
      const double *t = res[l].us[c][s][p];
      double ae = t[0] > 0 ? bench_algbw(k.bytes, t[0]) : -1;
      double ag = t[1] > 0 ? bench_algbw(k.bytes, t[1]) : -1;
      cell(f, 9, 2, t[0]);
      cell(f, 7, 2, ae);
      cell(f, 7, 2, ae < 0 ? -1 : ae * factor);
      cell(f, 9, 2, t[1]);
      cell(f, 7, 2, ag < 0 ? -1 : ag * factor);
      if (t[0] < 0 && t[1] < 0)
        fprintf(f, " %6s", "-");
      else
        fprintf(f, " %6lld", res[l].wrong[c][s][p][0] + res[l].wrong[c][s][p][1]);
      if (spd) {
        cell(f, 6, 2, speedup(o, res, l, c, s, p, 0));
        cell(f, 6, 2, speedup(o, res, l, c, s, p, 1));
      }
    }
    const char *po = res[l].path[c][s][0], *pi = res[l].path[c][s][1];
    if (has_path && pi[0] && strcmp(po, pi) != 0)
      fprintf(f, "  %s|%s", po[0] ? po : "?", pi);
    else if (has_path)
      fprintf(f, "  %s", po[0] ? po : pi);
    fprintf(f, "\n");
  }
}

void bench_write_csv(FILE *f, const bench_opts_t *o, const bench_result_t *res) {
  static const char *place_names[] = {"out", "in"}, *mode_names[] = {"eager", "graph"};
  fprintf(f, "%s\n", bench_csv_header);
  for (int l = 0; l < o->nlibs; l++) {
    if (!res[l].measured)
      continue;
    for (int ci = 0; ci < o->ncolls; ci++) {
      bench_coll_t c = o->colls[ci];
      double factor = bench_busbw_factor(c, o->ngpus);
      for (int s = 0; s < o->nsizes; s++) {
        bench_case_t k;
        if (bench_case(c, o->dtype, o->op, o->ngpus, o->root, o->sizes[s], &k) != 0)
          continue;
        for (int p = 0; p < BENCH_PLACES; p++)
          for (int m = 0; m < BENCH_MODES; m++) {
            double t = res[l].us[c][s][p][m];
            if (t <= 0)
              continue;
            double a = bench_algbw(k.bytes, t), x = speedup(o, res, l, c, s, p, m);
            fprintf(f, "%s,%s,%s,%d,%zu,%zu,%s,%s,%d,%s,%s,%.3f,%.4f,%.4f,%lld,", o->libs[l].label,
                    bench_coll_name(c), bench_model_name(o->model), o->ngpus, k.bytes, k.count,
                    bench_dtype_name(o->dtype),
                    bench_coll_has_op(c) ? bench_op_name(o->op) : "none",
                    bench_coll_has_root(c) ? o->root : -1, place_names[p], mode_names[m], t, a,
                    a * factor, res[l].wrong[c][s][p][m]);
            if (x > 0)
              fprintf(f, "%.4f", x);
            fprintf(f, ",%s\n", res[l].path[c][s][p]);
          }
      }
    }
  }
}

long long bench_total_wrong(const bench_opts_t *o, const bench_result_t *res) {
  long long n = 0;
  for (int l = 0; l < o->nlibs; l++)
    for (int c = 0; c < BENCH_COLL_COUNT && res[l].measured; c++)
      for (int s = 0; s < o->nsizes; s++)
        for (int p = 0; p < BENCH_PLACES; p++)
          n += res[l].wrong[c][s][p][0] + res[l].wrong[c][s][p][1];
  return n;
}

size_t bench_path_bytes(const bench_case_t *k) {
  size_t es = bench_dtype_size(k->dtype), b = k->count * es;
  if (k->coll == BENCH_ALLGATHER || k->coll == BENCH_REDUCESCATTER)
    b *= (size_t)k->nranks;
  return b;
}

void bench_path_of(const char *log, bench_coll_t coll, size_t bytes, int inplace, char *out,
                   size_t len) {
  static const char *pcl_names[BENCH_COLL_COUNT] = {
      "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AlltoAll", "Send"};
  char line[1024], want[96], place[16];
  out[0] = '\0';
  FILE *f = log && log[0] ? fopen(log, "r") : NULL;
  if (f == NULL)
    return;
  snprintf(want, sizeof(want), "pcl_path coll=%s bytes=%zu ", pcl_names[coll], bytes);
  snprintf(place, sizeof(place), " inplace=%d ", inplace);
  while (fgets(line, sizeof(line), f)) {
    const char *p = strstr(line, want), *q = p ? strstr(p, " path=") : NULL;
    if (q == NULL || strstr(p, place) == NULL)
      continue;
    q += 6;
    snprintf(out, len, "%.*s", (int)strcspn(q, " \n"), q);
    break;
  }
  fclose(f);
}

void bench_progress(FILE *f, int done, int total, double elapsed_us, const char *label,
                    bench_coll_t coll, size_t bytes) {
  char sz[32];
  bench_fmt_size(bytes, sz, sizeof(sz));
  long left = done > 0 ? (long)(elapsed_us / 1e6 / done * (total - done) + 0.5) : 0;
  fprintf(f, "planccl-bench: [%d/%d] %s %s %s done, %ld:%02ld left\n", done, total, label,
          bench_coll_name(coll), sz, left / 60, left % 60);
}
