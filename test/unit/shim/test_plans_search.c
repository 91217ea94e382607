/* SPDX-License-Identifier: MIT
 * The plan search path (shim/dispatch/plans_search.c) on directory layouts made for the test:
 * installed plans win, a library never installed takes the source tree's default set without
 * extra/, an install under the build tree is an install, PLANCCL_PLAN_DIR comes first; and where
 * the opt-in set is found for tuning files. */
#define _GNU_SOURCE
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "pcl_test.h"
#include "plans_search.h"

static char root[PATH_MAX];

static void mk(const char *rel) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof(p), "%s/%s", root, rel);
  for (char *s = p + strlen(root) + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      mkdir(p, 0700);
      *s = '/';
    }
  mkdir(p, 0700);
}

static const char *at(const char *rel) {
  static char p[4][PATH_MAX + 64];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof(p[k]), "%s/%s", root, rel);
  return p[k];
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

static void layout(void) {
  char tmpl[] = "/tmp/pcl_plans_search_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  ck_assert_ptr_nonnull(realpath(tmpl, root));
  mk("src/plans/allreduce");
  mk("src/plans/allgather");
  mk("src/plans/extra/allreduce");
  mk("build/lib");
  mk("build2/lib");
  mk("build/install/lib");
  mk("build/install/share/planccl/plans");
}

static void cleanup(void) {
  nftw(root, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

START_TEST(test_search_build_tree_takes_source_default_set) {
  layout();
  pcl_plans_dirs_t d;
  pcl_plans_search_dirs(NULL, at("build/lib"), at("build"), at("src/plans"), &d);
  ck_assert_int_eq(d.n, 2);
  ck_assert_str_eq(d.path[0], at("src/plans/allgather"));
  ck_assert_str_eq(d.path[1], at("src/plans/allreduce")); /* sorted; no extra/ */
  cleanup();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_search_install_under_build_tree_is_an_install) {
  layout();
  pcl_plans_dirs_t d;
  pcl_plans_search_dirs(NULL, at("build/install/lib"), at("build"), at("src/plans"), &d);
  ck_assert_int_eq(d.n, 1);
  ck_assert_str_eq(d.path[0], at("build/install/share/planccl/plans"));
  cleanup();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_search_outside_build_tree) {
  layout();
  pcl_plans_dirs_t d;
  /* build2 shares the name prefix "build" but is not inside it: only the installed path. */
  pcl_plans_search_dirs(NULL, at("build2/lib"), at("build"), at("src/plans"), &d);
  ck_assert_int_eq(d.n, 1);
  ck_assert_str_eq(d.path[0], at("build2/share/planccl/plans"));
  pcl_plans_search_dirs(NULL, at("build/lib"), NULL, NULL, &d); /* an installed build */
  ck_assert_int_eq(d.n, 1);
  ck_assert_str_eq(d.path[0], at("build/share/planccl/plans"));
  pcl_plans_search_dirs(NULL, NULL, at("build"), at("src/plans"), &d); /* library path unknown */
  ck_assert_int_eq(d.n, 0);
  cleanup();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_search_env_first) {
  layout();
  pcl_plans_dirs_t d;
  pcl_plans_search_dirs("/opt/a::/opt/b:", at("build/install/lib"), at("build"), at("src/plans"),
                        &d);
  ck_assert_int_eq(d.n, 3);
  ck_assert_str_eq(d.path[0], "/opt/a");
  ck_assert_str_eq(d.path[1], "/opt/b");
  ck_assert_str_eq(d.path[2], at("build/install/share/planccl/plans"));
  /* More directories than fit: the excess is dropped, nothing overflows. */
  char many[PCL_PLANS_MAX_DIRS * 8 + 64] = "";
  for (int i = 0; i < PCL_PLANS_MAX_DIRS + 5; i++)
    snprintf(many + strlen(many), sizeof(many) - strlen(many), "/d%d:", i);
  pcl_plans_search_dirs(many, at("build/lib"), at("build"), at("src/plans"), &d);
  ck_assert_int_eq(d.n, PCL_PLANS_MAX_DIRS);
  ck_assert_str_eq(d.path[PCL_PLANS_MAX_DIRS - 1], "/d31");
  cleanup();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The opt-in set a tuning file may name: the installed plans-extra, else inside the build tree
 * the source tree's extra/, else none. */
START_TEST(test_extra_dir) {
  layout();
  char d[PATH_MAX];
  ck_assert_int_eq(pcl_plans_extra_dir(at("build/lib"), at("build"), at("src/plans"), d), 1);
  ck_assert_str_eq(d, at("src/plans/extra"));
  ck_assert_int_eq(pcl_plans_extra_dir(at("build/install/lib"), at("build"), at("src/plans"), d),
                   0); /* an install without plans-extra is not the source tree */
  mk("build/install/share/planccl/plans-extra");
  ck_assert_int_eq(pcl_plans_extra_dir(at("build/install/lib"), at("build"), at("src/plans"), d),
                   1);
  ck_assert_str_eq(d, at("build/install/share/planccl/plans-extra"));
  ck_assert_int_eq(pcl_plans_extra_dir(at("build2/lib"), at("build"), at("src/plans"), d), 0);
  ck_assert_int_eq(pcl_plans_extra_dir(NULL, at("build"), at("src/plans"), d), 0);
  cleanup();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_plans_search(void) {
  TCase *tc = tcase_create("plans_search");
  tcase_add_test(tc, test_search_build_tree_takes_source_default_set);
  tcase_add_test(tc, test_search_install_under_build_tree_is_an_install);
  tcase_add_test(tc, test_search_outside_build_tree);
  tcase_add_test(tc, test_search_env_first);
  tcase_add_test(tc, test_extra_dir);
  return tc;
}
