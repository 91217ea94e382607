/* SPDX-License-Identifier: MIT
 * Private to shim/: the export macros, the real NCCL's function table (fallback.c), the group
 * depth (group.c), error bookkeeping (errors.c) and the unique-id layout (unique_id.c). */
#ifndef PCL_SHIM_INT_H
#define PCL_SHIM_INT_H

#include <nccl.h>
#include "bootstrap.h"
#include "nccl_compat_int.h"
#include "nccl_device_int.h"

/* Every exported nccl* function is weak with a strong pnccl* alias at the same address, as in
 * NCCL (a PMPI-style profiler may define ncclX and call pncclX). */
#define PCL_API __attribute__((visibility("default"), weak))
#define PCL_ALIAS(name)                                                                            \
  extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")));

/* PCL_NCCL_FNS (the functions planccl resolves, by the release that first exported them) and
 * PCL_NCCL_SINCE_* are in nccl_compat_int.h, where the fake NCCL of the tests finds them too. */

/* One pointer per real function, same name, same type; NULL when the library lacks it. */
struct pcl_nccl_fns {
#define PCL_NCCL_FN_MEMBER(name) __typeof__(name) *name;
  PCL_NCCL_FNS(PCL_NCCL_FN_MEMBER)
#undef PCL_NCCL_FN_MEMBER
};

/* ---- fallback.c: finding and opening the real NCCL ---- */

/* The real library's table, loaded once (pthread_once) at first use; NULL when none was found. */
const struct pcl_nccl_fns *pcl_fallback_fns(void);

/* Version code of the real library (0 when none), and its path ("" when none). */
int pcl_fallback_version(void);
const char *pcl_fallback_path(void);
/* A version code as text: "2.30.7"; "(unknown version)" for 0. */
void pcl_nccl_version_text(int code, char *buf, size_t size);

/* The return address of the exported function using it: who called planccl. */
#define PCL_CALLER __builtin_return_address(0)

/* 1 when `caller` lies inside the real library and that library was loaded without
 * RTLD_DEEPBIND (already loaded by someone else, e.g. libtorch's DT_NEEDED under LD_PRELOAD), so
 * that its calls to its own public names land in planccl. Such calls are forwarded unchanged.
 * Costs nothing when the real library is deep-bound. */
int pcl_fallback_called_by_real(const void *caller);

/* The error for a call that needs the real NCCL when none is loaded: one WARN per process that
 * says how to set PLANCCL_NCCL_LIB, then ncclInvalidUsage. */
ncclResult_t pcl_fallback_none(const char *fn);

/* The error for a function the loaded library lacks: ncclInvalidUsage, with one WARN per
 * function and process that names the real library, its version and the release that added `fn`
 * (later calls say it at INFO: a caller polling, e.g. ncclCommMemStats, would flood the log). */
ncclResult_t pcl_fallback_missing(const char *fn);

/* Declares `F`, the real table, and returns the right error from the enclosing function when the
 * real library or its function `fn` is missing. */
/* clang-format off */
#define PCL_NEED_REAL(fn)                                                                          \
  const struct pcl_nccl_fns *F = pcl_fallback_fns();                                               \
  if (F == NULL) return pcl_fallback_none(#fn);                                                    \
  if (F->fn == NULL) return pcl_fallback_missing(#fn)
/* clang-format on */

/* PCL_NEED_REAL, then declares `c` (planccl's comm, NULL for a bare real one) and `real` for
 * `comm`, returning on a bad handle (pcl_comm_lookup_real of comm.h, PCL_CHECK of pcl_check.h). */
#define PCL_NEED_COMM(fn, comm)                                                                    \
  PCL_NEED_REAL(fn);                                                                               \
  struct ncclComm *c;                                                                              \
  ncclComm_t real;                                                                                 \
  PCL_CHECK(pcl_comm_lookup_real(#fn, comm, PCL_CALLER, &c, &real))

/* ---- errors.c ---- */

/* Records that a forwarded call returned `res`; an error makes the real library's last-error
 * text the one ncclGetLastError reports, until planccl logs a newer WARN. Returns res. */
ncclResult_t pcl_errors_real_result(ncclResult_t res);

/* ---- group.c ---- */

/* ncclGroupStart/End nesting depth of the calling thread (mirrors the real library's). */
int pcl_group_depth(void);

/* ---- unique_id.c ---- */

/* Byte offset of planccl's part of an ncclUniqueId (bytes 0..39 are the real id). */
#define PCL_UNIQUE_ID_PCL_OFFSET 40

/* Fills bytes 40..127 of `id` with planccl's part: a new bootstrap root's handle, or zeros when
 * planccl's own part cannot run in this process. */
ncclResult_t pcl_unique_id_fill(ncclUniqueId *id);

/* Copies planccl's part of `id` into *h (a pcl_bootstrap_handle_t); 1 when it is valid (the id
 * was made by planccl with its part). */
int pcl_unique_id_get(const ncclUniqueId *id, pcl_bootstrap_handle_t *h);

#endif
