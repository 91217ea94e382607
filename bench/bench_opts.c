/* SPDX-License-Identifier: MIT
 * planccl-bench's command line parser and the names of collectives, data types, ops and process
 * models. Every bad argument ends in a one-line reason; main prints it with the usage, exit 2. */
#include "bench_opts.h"
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const coll_names[BENCH_COLL_COUNT] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"};
static const char *const dtype_names[BENCH_DTYPE_COUNT] = {
    "int8", "uint8", "int32",  "uint32",   "int64",   "uint64",
    "half", "float", "double", "bfloat16", "fp8e4m3", "fp8e5m2"};
static const size_t dtype_sizes[BENCH_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static const char *const op_names[BENCH_OP_COUNT] = {"sum", "prod", "max", "min", "avg"};
static const char *const model_names[] = {"thread", "single", "proc"};

const char *bench_coll_name(bench_coll_t c) {
  return (unsigned)c < BENCH_COLL_COUNT ? coll_names[c] : "?";
}
const char *bench_dtype_name(bench_dtype_t t) {
  return (unsigned)t < BENCH_DTYPE_COUNT ? dtype_names[t] : "?";
}
const char *bench_op_name(bench_op_t op) {
  return (unsigned)op < BENCH_OP_COUNT ? op_names[op] : "?";
}
const char *bench_model_name(bench_model_t m) {
  return (unsigned)m <= BENCH_MODEL_PROC ? model_names[m] : "?";
}
size_t bench_dtype_size(bench_dtype_t t) {
  return (unsigned)t < BENCH_DTYPE_COUNT ? dtype_sizes[t] : 0;
}
int bench_coll_has_op(bench_coll_t c) {
  return c == BENCH_ALLREDUCE || c == BENCH_REDUCESCATTER || c == BENCH_REDUCE;
}
int bench_coll_has_root(bench_coll_t c) {
  return c == BENCH_BROADCAST || c == BENCH_REDUCE;
}
int bench_coll_has_inplace(bench_coll_t c) {
  return c != BENCH_ALLTOALL && c != BENCH_SENDRECV;
}

void bench_usage(FILE *f) {
  fprintf(
      f,
      "usage: planccl-bench --lib LABEL=PATH[:symm] [--lib ...] [options]\n"
      "  --lib LABEL=PATH[:symm]  an NCCL-compatible library to measure (up to 8); ':symm'\n"
      "                           allocates its buffers with ncclMemAlloc and registers them as\n"
      "                           NCCL_WIN_COLL_SYMMETRIC windows (NCCL's symmetric kernels)\n"
      "  --baseline LABEL         the library the others' speedup is computed against (first)\n"
      "  --coll LIST              allreduce,allgather,reducescatter,broadcast,reduce,alltoall,\n"
      "                           sendrecv or all (default allreduce)\n"
      "  --dtype T                int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                           bfloat16 fp8e4m3 fp8e5m2 (default float)\n"
      "  --op OP                  sum prod max min avg (default sum)\n"
      "  --root R                 root of broadcast and reduce (default 0)\n"
      "  -b BYTES -e BYTES -f F   size sweep, total bytes of the largest buffer as in nccl-tests\n"
      "                           (default 1K..256M x4)\n"
      "  -n ITERS -w WARMUP       timed and warm-up calls per size (default 50, 10)\n"
      "  -G ITERS                 calls per CUDA graph, replayed 10 times (0 = no graphs; 20)\n"
      "  -g NGPUS                 GPUs (default 2)\n"
      "  --model M                thread: one thread per GPU (default); single: one thread drives\n"
      "                           all GPUs (ncclCommInitAll and groups); proc: one process per\n"
      "                           GPU, started by the bench itself\n"
      "  --place P                out, in or both (default both): out-of-place, in-place\n"
      "  --repeat R               runs per library, order alternating, best time kept (2)\n"
      "  --csv FILE               also write every result as CSV (bench/plot.py plots it)\n"
      "  --timeout S              proc model: kill a run not done after S seconds (900)\n"
      "  --hostpath               thread model: also the host path of one call and the launch\n"
      "                           floors under it (lines starting '# host path')\n"
      "  --hostpath-sizes N       with --hostpath: the calls cycle through N sizes from -b up,\n"
      "                           8 bytes per rank apart (1); their first calls timed apart\n"
      "  --share-gpu              ranks share the visible GPUs (rank r on GPU r mod their count):\n"
      "                           planccl over a stand-in NCCL; the real NCCL refuses it\n"
      "Exit status: 0 all results right, 1 a wrong result or a library that failed, 2 usage.\n");
}

long long bench_parse_bytes(const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || errno != 0 || v < 0)
    return -1;
  long long mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1ll << 10;
  else if (*end == 'M' || *end == 'm')
    mul = 1ll << 20;
  else if (*end == 'G' || *end == 'g')
    mul = 1ll << 30;
  if (mul != 1)
    end++;
  if (*end != '\0' || v > LLONG_MAX / mul)
    return -1;
  return v * mul;
}

int bench_sweep(size_t minb, size_t maxb, double factor, size_t *out, int cap) {
  int n = 0;
  /* The tolerance keeps a max that is a product of the factor despite the rounding. */
  for (double s = (double)minb; s <= (double)maxb * 1.0001; s *= factor) {
    if (n == cap)
      return -1;
    out[n++] = (size_t)(s + 0.5);
  }
  return n;
}

static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

static int lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

static int parse_colls(char *list, bench_opts_t *o) {
  o->ncolls = 0;
  if (strcmp(list, "all") == 0) {
    for (int c = 0; c < BENCH_COLL_COUNT; c++)
      o->colls[o->ncolls++] = (bench_coll_t)c;
    return 0;
  }
  unsigned seen = 0;
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int c = lookup(t, coll_names, BENCH_COLL_COUNT);
    if (c < 0 || (seen & (1u << c)))
      return -1;
    seen |= 1u << c;
    o->colls[o->ncolls++] = (bench_coll_t)c;
  }
  return o->ncolls > 0 ? 0 : -1;
}

static int parse_lib(char *spec, bench_opts_t *o) {
  char *eq = strchr(spec, '=');
  if (o->nlibs == BENCH_MAX_LIBS || eq == NULL || eq == spec || eq[1] == '\0')
    return -1;
  *eq = '\0';
  bench_lib_spec_t *l = &o->libs[o->nlibs];
  *l = (bench_lib_spec_t){.label = spec, .path = eq + 1};
  size_t n = strlen(l->path);
  if (n > 5 && strcmp(l->path + n - 5, ":symm") == 0) {
    eq[1 + n - 5] = '\0';
    l->symm = 1;
  }
  for (int i = 0; i < o->nlibs; i++)
    if (strcmp(o->libs[i].label, l->label) == 0)
      return -1;
  o->nlibs++;
  return 0;
}

size_t bench_hostpath_step(const bench_opts_t *o) {
  const size_t es = bench_dtype_size(o->dtype);
  return (es > 8 ? es : 8) * (size_t)o->ngpus;
}

/* Checks that only make sense once every option is known. */
static int validate(bench_opts_t *o, const char *baseline, char *err, size_t len) {
  if (o->nlibs == 0)
    return fail(err, len, "no library: give at least one --lib LABEL=PATH");
  if (o->root >= o->ngpus)
    return fail(err, len, "--root %d is not a rank of %d GPUs", o->root, o->ngpus);
  if (o->hostpath && o->model != BENCH_MODEL_THREAD)
    return fail(err, len, "--hostpath needs --model thread");
  if (o->hostpath_sizes > 1 && !o->hostpath)
    return fail(err, len, "--hostpath-sizes needs --hostpath");
  if (o->sizes[0] + (size_t)(o->hostpath_sizes - 1) * bench_hostpath_step(o) >
      o->sizes[o->nsizes - 1])
    return fail(err, len, "--hostpath-sizes %d: the largest cycled size passes -e %zu",
                o->hostpath_sizes, o->sizes[o->nsizes - 1]);
  o->baseline = 0;
  if (baseline) {
    o->baseline = -1;
    for (int i = 0; i < o->nlibs; i++)
      if (strcmp(o->libs[i].label, baseline) == 0)
        o->baseline = i;
    if (o->baseline < 0)
      return fail(err, len, "--baseline %s is not the label of a --lib", baseline);
  }
  return 0;
}

int bench_parse_args(int argc, char **argv, bench_opts_t *o, char *err, size_t len) {
  *o = (bench_opts_t){.ncolls = 1,
                      .colls = {BENCH_ALLREDUCE},
                      .dtype = BENCH_FLOAT,
                      .op = BENCH_SUM,
                      .ngpus = 2,
                      .iters = 50,
                      .warmup = 10,
                      .graph_iters = 20,
                      .graph_launches = 10,
                      .repeat = 2,
                      .places = BENCH_PLACE_OUT | BENCH_PLACE_IN,
                      .hostpath_sizes = 1,
                      .timeout_s = 900};
  long long minb = 1024, maxb = 256ll << 20;
  double factor = 4;
  const char *baseline = NULL;
  err[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      return 1;
    if (!strcmp(a, "--hostpath")) {
      o->hostpath = 1;
      continue;
    }
    if (!strcmp(a, "--share-gpu")) {
      o->share_gpu = 1;
      continue;
    }
    if (i + 1 == argc)
      return fail(err, len, "%s: unknown option or missing value", a);
    char *v = argv[++i];
    int bad = 0, x;
    if (!strcmp(a, "--lib"))
      bad = parse_lib(v, o);
    else if (!strcmp(a, "--baseline"))
      baseline = v;
    else if (!strcmp(a, "--coll"))
      bad = parse_colls(v, o);
    else if (!strcmp(a, "--dtype"))
      bad = (x = lookup(v, dtype_names, BENCH_DTYPE_COUNT)) < 0 ? -1 : (o->dtype = x, 0);
    else if (!strcmp(a, "--op"))
      bad = (x = lookup(v, op_names, BENCH_OP_COUNT)) < 0 ? -1 : (o->op = x, 0);
    else if (!strcmp(a, "--model"))
      bad = (x = lookup(v, model_names, 3)) < 0 ? -1 : (o->model = x, 0);
    else if (!strcmp(a, "--place"))
      bad = !strcmp(v, "out")    ? (o->places = BENCH_PLACE_OUT, 0)
            : !strcmp(v, "in")   ? (o->places = BENCH_PLACE_IN, 0)
            : !strcmp(v, "both") ? (o->places = BENCH_PLACE_OUT | BENCH_PLACE_IN, 0)
                                 : -1;
    else if (!strcmp(a, "--root"))
      bad = parse_int(v, 0, BENCH_MAX_GPUS - 1, &o->root);
    else if (!strcmp(a, "-b"))
      bad = (minb = bench_parse_bytes(v)) <= 0 ? -1 : 0;
    else if (!strcmp(a, "-e"))
      bad = (maxb = bench_parse_bytes(v)) <= 0 ? -1 : 0;
    else if (!strcmp(a, "-f")) {
      char *end;
      factor = strtod(v, &end);
      bad = end == v || *end != '\0' || !(factor > 1) || factor > 1024 ? -1 : 0;
    } else if (!strcmp(a, "-n"))
      bad = parse_int(v, 1, 1 << 24, &o->iters);
    else if (!strcmp(a, "-w"))
      bad = parse_int(v, 0, 1 << 24, &o->warmup);
    else if (!strcmp(a, "-G"))
      bad = parse_int(v, 0, 1 << 16, &o->graph_iters);
    else if (!strcmp(a, "-g"))
      bad = parse_int(v, 1, BENCH_MAX_GPUS, &o->ngpus);
    else if (!strcmp(a, "--repeat"))
      bad = parse_int(v, 1, 100, &o->repeat);
    else if (!strcmp(a, "--hostpath-sizes"))
      bad = parse_int(v, 1, 1 << 16, &o->hostpath_sizes);
    else if (!strcmp(a, "--timeout"))
      bad = parse_int(v, 1, 86400, &o->timeout_s);
    else if (!strcmp(a, "--csv"))
      o->csv = v;
    else
      return fail(err, len, "%s: unknown option", a);
    if (bad)
      return fail(err, len, "%s %s: bad value", a, v);
  }
  if (maxb < minb)
    return fail(err, len, "-e %lld is below -b %lld", maxb, minb);
  o->nsizes = bench_sweep((size_t)minb, (size_t)maxb, factor, o->sizes, BENCH_MAX_SIZES);
  if (o->nsizes < 0)
    return fail(err, len, "the sweep has more than %d sizes", BENCH_MAX_SIZES);
  return validate(o, baseline, err, len);
}
