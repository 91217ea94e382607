/* SPDX-License-Identifier: MIT
 * Helpers for the shim suite: reach the recording fake NCCL that planccl opened, find recorded
 * calls, make temporary directory layouts. Each test runs in a fresh forked process in which
 * planccl has not loaded anything yet, so every test chooses its own real library. */
#ifndef PCL_SHIM_TEST_H
#define PCL_SHIM_TEST_H

#include <check.h>
#include <nccl.h>
#include "fake_nccl.h"

/* Environment paths set by CMake. */
const char *shim_test_path(const char *var);

/* Points planccl at the fake (PCL_FAKE_NCCL or PCL_FAKE_NCCL_PARTIAL), makes planccl load it
 * (with its own RTLD_DEEPBIND open) and returns the fake's control block. */
struct fake_state *shim_test_use_fake(const char *var);
/* The same for a fake built at an older API level (FAKE_LEVEL), which reports `version`. */
struct fake_state *shim_test_use_fake_version(const char *var, int version);

/* Makes a comm of `nranks` ranks as `rank` through planccl; returns it and (*real) the fake's. */
ncclComm_t shim_test_make_comm(struct fake_state *st, int nranks, int rank, void **real);

/* Makes the fake's function `name` return `r` from now on. */
void shim_test_set_result(struct fake_state *st, const char *name, ncclResult_t r);

/* Destroys `comm` with stderr sent to `path`, where PLANCCL_STATS=1 prints its table. */
void shim_test_destroy_with_stats(ncclComm_t comm, const char *path);
/* Calls counted in that table for a collective ("AllReduce") on a route ("nccl (per-call
 * config)", "plan <name>"), 0 when there is no such row; and the number of rows of the collective.
 */
long shim_test_stats_calls(const char *path, const char *coll, const char *route);
int shim_test_stats_rows(const char *path, const char *coll);

/* The control block of an already loaded fake at `path`; NULL when that file is not loaded. */
struct fake_state *shim_test_fake_at(const char *path);

/* Index of the last recorded call named `name` at or after `from`, or -1. */
int shim_test_last(const struct fake_state *st, const char *name);
int shim_test_count(const struct fake_state *st, const char *name);

/* Lines of the file at `path` that contain `a` and, unless NULL, `b` (0 when there is no file):
 * counts planccl's log lines under PLANCCL_DEBUG_FILE. */
int shim_test_count_lines(const char *path, const char *a, const char *b);

/* 1 when a loaded object resolves (realpath) to `path`. */
int shim_test_loaded(const char *path);

/* mkdtemp under /tmp; `mkdirs` makes every component; `copy` copies a file. */
char *shim_test_tmpdir(void);
void shim_test_mkdirs(const char *path);
/* A fresh tmpdir whose log.txt (its path in `log`) receives planccl's log (PLANCCL_DEBUG_FILE);
 * the caller removes and frees the directory. */
char *shim_test_log_dir(char *log, size_t len);
void shim_test_copy(const char *from, const char *to);
void shim_test_rmtree(const char *path);

/* Sanitizer builds: planccl opens the real library without RTLD_DEEPBIND (shim/abi/fallback.c), and
 * freed memory sits in ASan's quarantine, so RSS is no measure of leaks there (LeakSanitizer is).
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHIM_TEST_SANITIZED 1
#else
#define SHIM_TEST_SANITIZED 0
#endif

#define U64(x) ((uint64_t)(uintptr_t)(x))
#define I64(x) ((uint64_t)(int64_t)(x))

TCase *shim_tcase_forward(void);
TCase *shim_tcase_lifecycle(void);
TCase *shim_tcase_discovery(void);
TCase *shim_tcase_symbols(void);
TCase *shim_tcase_lookup(void);
TCase *shim_tcase_config(void);
TCase *shim_tcase_suspend(void);
TCase *shim_tcase_levels(void);

#endif
