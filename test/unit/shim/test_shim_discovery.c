/* SPDX-License-Identifier: MIT
 * Finding the real NCCL: PLANCCL_NCCL_LIB first, then the nvidia/nccl package next to a loaded
 * libtorch, then LD_LIBRARY_PATH and the other system paths; never planccl itself, neither a copy
 * named libnccl.so.2 nor a symlink to it. Discovery runs at planccl's first call, so each test
 * arranges the environment before its first nccl* call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shim_test.h"

static void path_join(char *out, const char *a, const char *b) {
  ck_assert_int_lt(snprintf(out, PATH_MAX, "%s/%s", a, b), PATH_MAX);
}

START_TEST(test_discovery_torch_layout) {
  unsetenv("PLANCCL_NCCL_LIB");
  setenv("LD_LIBRARY_PATH", "", 1);
  char *dir = shim_test_tmpdir();
  char torch_lib[PATH_MAX], nccl_lib[PATH_MAX], stub[PATH_MAX], fake[PATH_MAX];
  path_join(torch_lib, dir, "site-packages/torch/lib");
  path_join(nccl_lib, dir, "site-packages/nvidia/nccl/lib");
  shim_test_mkdirs(torch_lib);
  shim_test_mkdirs(nccl_lib);
  path_join(stub, torch_lib, "libtorch_cuda.so");
  path_join(fake, nccl_lib, "libnccl.so.2");
  shim_test_copy(shim_test_path("PCL_TORCH_STUB"), stub);
  shim_test_copy(shim_test_path("PCL_FAKE_NCCL"), fake);
  void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL); /* "import torch" */
  ck_assert_ptr_nonnull(h);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, FAKE_VERSION);
  ck_assert(shim_test_loaded(fake));
  ck_assert_ptr_nonnull(shim_test_fake_at(fake));
  dlclose(h);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* A copy of planccl named libnccl.so.2 and a symlink to planccl come first on LD_LIBRARY_PATH;
 * both are skipped (without being loaded) and the fake behind them is used. */
START_TEST(test_discovery_ld_library_path_skips_planccl) {
  unsetenv("PLANCCL_NCCL_LIB");
  char *dir = shim_test_tmpdir();
  char d_link[PATH_MAX], d_copy[PATH_MAX], d_fake[PATH_MAX], p[PATH_MAX], copy[PATH_MAX];
  char fake[PATH_MAX];
  path_join(d_link, dir, "link");
  path_join(d_copy, dir, "copy");
  path_join(d_fake, dir, "fake");
  shim_test_mkdirs(d_link);
  shim_test_mkdirs(d_copy);
  shim_test_mkdirs(d_fake);
  path_join(p, d_link, "libnccl.so.2");
  ck_assert_int_eq(symlink(shim_test_path("PCL_PLANCCL_LIB"), p), 0);
  path_join(copy, d_copy, "libnccl.so.2");
  shim_test_copy(shim_test_path("PCL_PLANCCL_LIB"), copy);
  path_join(fake, d_fake, "libnccl.so.2");
  shim_test_copy(shim_test_path("PCL_FAKE_NCCL"), fake);
  char llp[3 * PATH_MAX + 8];
  ck_assert_int_lt(snprintf(llp, sizeof(llp), "%s:%s:/nonexistent:%s", d_link, d_copy, d_fake),
                   (int)sizeof(llp));
  setenv("LD_LIBRARY_PATH", llp, 1);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, FAKE_VERSION);
  ck_assert(shim_test_loaded(fake));
  ck_assert(!shim_test_loaded(copy));
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* PLANCCL_NCCL_LIB wins over a libtorch layout and LD_LIBRARY_PATH. */
START_TEST(test_discovery_env_first) {
  char *dir = shim_test_tmpdir();
  char fake2[PATH_MAX];
  path_join(fake2, dir, "libnccl.so.2");
  shim_test_copy(shim_test_path("PCL_FAKE_NCCL_PARTIAL"), fake2);
  setenv("LD_LIBRARY_PATH", dir, 1);
  setenv("PLANCCL_NCCL_LIB", shim_test_path("PCL_FAKE_NCCL"), 1);
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert(shim_test_loaded(shim_test_path("PCL_FAKE_NCCL")));
  ck_assert(!shim_test_loaded(fake2));
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* An explicit path to planccl itself is refused: no real NCCL, and planccl not loaded twice. */
START_TEST(test_discovery_env_pointing_to_planccl) {
  char *dir = shim_test_tmpdir();
  char copy[PATH_MAX];
  path_join(copy, dir, "libnccl.so.2");
  shim_test_copy(shim_test_path("PCL_PLANCCL_LIB"), copy);
  setenv("PLANCCL_NCCL_LIB", copy, 1);
  ncclUniqueId id;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclInvalidUsage);
  ck_assert(!shim_test_loaded(copy));
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, NCCL_VERSION_CODE);
  shim_test_rmtree(dir);
  free(dir);
}
END_TEST

/* With nothing arranged, the system's NCCL (ld.so.cache or $CUDA_HOME/lib64) is found when the
 * machine has one; the CUDA toolkit image used by CI does. */
START_TEST(test_discovery_system_nccl) {
  unsetenv("PLANCCL_NCCL_LIB");
  unsetenv("LD_LIBRARY_PATH");
  const char *real = getenv("PCL_REAL_NCCL");
  if (real == NULL || access(real, R_OK) != 0)
    return; /* no system NCCL on this machine */
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_ge(v, 22800);
  ck_assert_int_ne(v, FAKE_VERSION);
}
END_TEST

TCase *shim_tcase_discovery(void) {
  TCase *tc = tcase_create("discovery");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_discovery_torch_layout);
  tcase_add_test(tc, test_discovery_ld_library_path_skips_planccl);
  tcase_add_test(tc, test_discovery_env_first);
  tcase_add_test(tc, test_discovery_env_pointing_to_planccl);
  tcase_add_test(tc, test_discovery_system_nccl);
  return tc;
}
