/* SPDX-License-Identifier: MIT
 * The test cases of the planccl-bench suite (test_bench_*.c), gathered by test_bench.c. */
#ifndef PCL_BENCH_TEST_H
#define PCL_BENCH_TEST_H

#include <check.h>

TCase *bench_tcase_opts(void);
TCase *bench_tcase_check(void);
TCase *bench_tcase_report(void);
TCase *bench_tcase_spawn(void);

#endif
