/* SPDX-License-Identifier: MIT
 * Shared helpers for the Check suites: every test runs in its own process (Check's fork mode) and
 * ends by proving that it left no pcl_* allocation behind. */
#ifndef PCL_TEST_H
#define PCL_TEST_H

#include <check.h>
#include <stdlib.h>
#include "alloc.h"

#define PCL_ASSERT_NO_LEAKS()                                                                      \
  ck_assert_msg(pcl_alloc_outstanding() == 0, "%lld pcl allocations leaked",                       \
                (long long)pcl_alloc_outstanding())

/* Runs one suite with Check's fork mode forced on, returns the process exit code. */
static inline int pcl_test_run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
