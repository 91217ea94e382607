/* SPDX-License-Identifier: MIT
 * planccl-bench's command line: defaults, every option, the lib spec's :symm, the sweep, and
 * each kind of bad argument refused with a reason (main turns that into exit 2). */
#include <stdarg.h>
#include <string.h>
#include "bench_opts.h"
#include "bench_test.h"

/* Parses a NULL-terminated list of arguments (copied: --lib writes into them). */
static int parse(bench_opts_t *o, char *err, ...) {
  static char store[63][128];
  char *argv[64] = {"planccl-bench"};
  int argc = 1;
  va_list ap;
  va_start(ap, err);
  for (const char *a; (a = va_arg(ap, const char *)) != NULL && argc < 64; argc++) {
    snprintf(store[argc - 1], sizeof(store[0]), "%s", a);
    argv[argc] = store[argc - 1];
  }
  va_end(ap);
  return bench_parse_args(argc, argv, o, err, 256);
}

START_TEST(test_defaults) {
  bench_opts_t o;
  char err[256];
  ck_assert_int_eq(parse(&o, err, "--lib", "nccl=/x/libnccl.so.2", NULL), 0);
  ck_assert_int_eq(o.nlibs, 1);
  ck_assert_str_eq(o.libs[0].label, "nccl");
  ck_assert_str_eq(o.libs[0].path, "/x/libnccl.so.2");
  ck_assert_int_eq(o.libs[0].symm, 0);
  ck_assert_int_eq(o.ncolls, 1);
  ck_assert_int_eq(o.colls[0], BENCH_ALLREDUCE);
  ck_assert_int_eq(o.dtype, BENCH_FLOAT);
  ck_assert_int_eq(o.op, BENCH_SUM);
  ck_assert_int_eq(o.ngpus, 2);
  ck_assert_int_eq(o.model, BENCH_MODEL_THREAD);
  ck_assert_int_eq(o.places, BENCH_PLACE_OUT | BENCH_PLACE_IN);
  ck_assert_int_eq(o.repeat, 2);
  ck_assert_int_eq(o.baseline, 0);
  ck_assert_ptr_null(o.csv);
  /* 1K .. 256M by 4: 1K 4K 16K 64K 256K 1M 4M 16M 64M 256M */
  ck_assert_int_eq(o.nsizes, 10);
  ck_assert_uint_eq(o.sizes[0], 1024);
  ck_assert_uint_eq(o.sizes[9], 256u << 20);
  ck_assert_int_eq(o.hostpath, 0);
  ck_assert_int_eq(o.share_gpu, 0);
  /* The two flags without a value, alone and together. */
  ck_assert_int_eq(parse(&o, err, "--lib", "p=/p", "--share-gpu", NULL), 0);
  ck_assert_int_eq(o.share_gpu, 1);
  ck_assert_int_eq(o.hostpath, 0);
  ck_assert_int_eq(parse(&o, err, "--lib", "p=/p", "--hostpath", "--share-gpu", "-g", "4", NULL),
                   0);
  ck_assert_int_eq(o.share_gpu, 1);
  ck_assert_int_eq(o.hostpath, 1);
  ck_assert_int_eq(o.ngpus, 4);
  ck_assert_int_eq(o.hostpath_sizes, 1);
  /* Cycled sizes: 8 bytes per rank apart. */
  ck_assert_int_eq(parse(&o, err, "--lib", "p=/p", "--hostpath", "--hostpath-sizes", "256", "-b",
                         "1K", "-e", "8K", "-f", "2", NULL),
                   0);
  ck_assert_int_eq(o.hostpath_sizes, 256);
  ck_assert_uint_eq(bench_hostpath_step(&o), 16);
  ck_assert_int_eq(parse(&o, err, "--lib", "p=/p", "--hostpath", "--hostpath-sizes", "256",
                         "--coll", "allgather", "-g", "8", "-b", "1K", "-e", "32K", "-f", "2",
                         NULL),
                   0);
  ck_assert_uint_eq(bench_hostpath_step(&o), 64);
  /* 1K + 128 * 64 passes 8K: refused with the reason. */
  ck_assert_int_eq(parse(&o, err, "--lib", "p=/p", "--hostpath", "--hostpath-sizes", "129",
                         "--coll", "allgather", "-g", "8", "-b", "1K", "-e", "8K", "-f", "2", NULL),
                   -1);
  ck_assert_ptr_nonnull(strstr(err, "largest cycled size"));
}
END_TEST

START_TEST(test_every_option) {
  bench_opts_t o;
  char err[256];
  ck_assert_int_eq(parse(&o, err, "--lib", "planccl=/p/libplanccl.so", "--lib",
                         "nccl-symm=/n/libnccl.so.2:symm", "--lib", "nccl=/n/libnccl.so.2",
                         "--baseline", "nccl", "--coll", "reduce,sendrecv,broadcast", "--dtype",
                         "bfloat16", "--op", "max", "--root", "3", "-b", "8", "-e", "1M", "-f", "2",
                         "-n", "7", "-w", "3", "-G", "0", "-g", "4", "--model", "proc", "--place",
                         "in", "--repeat", "3", "--csv", "/tmp/x.csv", "--timeout", "60", NULL),
                   0);
  ck_assert_int_eq(o.nlibs, 3);
  ck_assert_str_eq(o.libs[1].label, "nccl-symm");
  ck_assert_str_eq(o.libs[1].path, "/n/libnccl.so.2");
  ck_assert_int_eq(o.libs[1].symm, 1);
  ck_assert_int_eq(o.libs[2].symm, 0);
  ck_assert_int_eq(o.baseline, 2);
  ck_assert_int_eq(o.ncolls, 3);
  ck_assert_int_eq(o.colls[0], BENCH_REDUCE);
  ck_assert_int_eq(o.colls[1], BENCH_SENDRECV);
  ck_assert_int_eq(o.colls[2], BENCH_BROADCAST);
  ck_assert_int_eq(o.dtype, BENCH_BFLOAT16);
  ck_assert_int_eq(o.op, BENCH_MAX);
  ck_assert_int_eq(o.root, 3);
  ck_assert_int_eq(o.iters, 7);
  ck_assert_int_eq(o.warmup, 3);
  ck_assert_int_eq(o.graph_iters, 0);
  ck_assert_int_eq(o.ngpus, 4);
  ck_assert_int_eq(o.model, BENCH_MODEL_PROC);
  ck_assert_int_eq(o.places, BENCH_PLACE_IN);
  ck_assert_int_eq(o.repeat, 3);
  ck_assert_str_eq(o.csv, "/tmp/x.csv");
  ck_assert_int_eq(o.timeout_s, 60);
  ck_assert_int_eq(o.nsizes, 18); /* 8 B .. 1 MiB by 2 */
  ck_assert_uint_eq(o.sizes[17], 1u << 20);
  ck_assert_int_eq(parse(&o, err, "--lib", "a=/a", "--coll", "all", "--model", "single", NULL), 0);
  ck_assert_int_eq(o.ncolls, BENCH_COLL_COUNT);
  ck_assert_int_eq(o.model, BENCH_MODEL_SINGLE);
  ck_assert_int_eq(parse(&o, err, "--lib", "a=/a", "--help", NULL), 1);
}
END_TEST

START_TEST(test_bad_arguments) {
  /* each after "--lib a=/a", split at spaces */
  static const char *bad[] = {"--bogus 1",
                              "-n",
                              "--lib noequals",
                              "--lib =/a",
                              "--lib a=",
                              "--lib a=/b",
                              "--dtype fp4",
                              "--op xor",
                              "--coll gath",
                              "--coll allreduce,allreduce",
                              "--root 2",
                              "-b 12Q",
                              "-b -4",
                              "-b 4M -e 1M",
                              "-f 1",
                              "-n 0",
                              "-g 9",
                              "-g two",
                              "--model mpi",
                              "--place sideways",
                              "--baseline b",
                              "--hostpath --model proc",
                              "--hostpath-sizes 4",
                              "--hostpath --hostpath-sizes 0",
                              "-b 1 -e 1G -f 1.01"};
  bench_opts_t o;
  char err[256];
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char line[128], *a[8] = {0};
    snprintf(line, sizeof(line), "%s", bad[i]);
    char *save = NULL, *t = strtok_r(line, " ", &save);
    for (int n = 0; t && n < 7; t = strtok_r(NULL, " ", &save))
      a[n++] = t;
    int rc = parse(&o, err, "--lib", "a=/a", a[0], a[1], a[2], a[3], a[4], a[5], a[6], NULL);
    ck_assert_msg(rc == -1, "'%s' accepted", bad[i]);
    ck_assert_msg(strlen(err) > 5, "'%s': no reason given", bad[i]);
  }
  ck_assert_int_eq(parse(&o, err, "--model", "thread", NULL), -1);
  ck_assert_ptr_nonnull(strstr(err, "no library"));
  ck_assert_int_eq(parse(&o, err, "--lib", "a=/a", "--root", "2", NULL), -1);
  ck_assert_str_eq(err, "--root 2 is not a rank of 2 GPUs");
}
END_TEST

START_TEST(test_bytes_and_sweep) {
  ck_assert_int_eq(bench_parse_bytes("100"), 100);
  ck_assert_int_eq(bench_parse_bytes("4K"), 4096);
  ck_assert_int_eq(bench_parse_bytes("3m"), 3 << 20);
  ck_assert_int_eq(bench_parse_bytes("2G"), 2ll << 30);
  ck_assert_int_eq(bench_parse_bytes("K"), -1);
  ck_assert_int_eq(bench_parse_bytes("1KB"), -1);
  ck_assert_int_eq(bench_parse_bytes("1.5M"), -1);
  size_t s[BENCH_MAX_SIZES];
  ck_assert_int_eq(bench_sweep(1024, 1024, 2, s, BENCH_MAX_SIZES), 1);
  ck_assert_int_eq(bench_sweep(1000, 8000, 2, s, BENCH_MAX_SIZES), 4);
  ck_assert_uint_eq(s[3], 8000);
  ck_assert_int_eq(bench_sweep(1, 1u << 30, 1.5, s, BENCH_MAX_SIZES), 52);
  ck_assert_int_eq(bench_sweep(1, 1u << 30, 1.1, s, BENCH_MAX_SIZES), -1);
}
END_TEST

START_TEST(test_names_and_traits) {
  ck_assert_str_eq(bench_coll_name(BENCH_REDUCESCATTER), "reducescatter");
  ck_assert_str_eq(bench_dtype_name(BENCH_FP8E5M2), "fp8e5m2");
  ck_assert_str_eq(bench_op_name(BENCH_AVG), "avg");
  ck_assert_str_eq(bench_model_name(BENCH_MODEL_SINGLE), "single");
  ck_assert_uint_eq(bench_dtype_size(BENCH_HALF), 2);
  ck_assert_uint_eq(bench_dtype_size(BENCH_UINT64), 8);
  ck_assert_uint_eq(bench_dtype_size(BENCH_FP8E4M3), 1);
  int ops = 0, roots = 0, inplace = 0;
  for (int c = 0; c < BENCH_COLL_COUNT; c++) {
    ops += bench_coll_has_op(c);
    roots += bench_coll_has_root(c);
    inplace += bench_coll_has_inplace(c);
  }
  ck_assert_int_eq(ops, 3);     /* allreduce, reducescatter, reduce */
  ck_assert_int_eq(roots, 2);   /* broadcast, reduce */
  ck_assert_int_eq(inplace, 5); /* not alltoall, sendrecv */
}
END_TEST

TCase *bench_tcase_opts(void) {
  TCase *tc = tcase_create("opts");
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_every_option);
  tcase_add_test(tc, test_bad_arguments);
  tcase_add_test(tc, test_bytes_and_sweep);
  tcase_add_test(tc, test_names_and_traits);
  return tc;
}
