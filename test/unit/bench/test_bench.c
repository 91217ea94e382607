/* SPDX-License-Identifier: MIT
 * The planccl-bench suite: its CUDA-free parts (options, checks, writers, launcher), no GPU. */
#include "bench_test.h"
#include "pcl_test.h"

int main(void) {
  Suite *s = suite_create("bench");
  suite_add_tcase(s, bench_tcase_opts());
  suite_add_tcase(s, bench_tcase_check());
  suite_add_tcase(s, bench_tcase_report());
  suite_add_tcase(s, bench_tcase_spawn());
  return pcl_test_run_suite(s);
}
