/* SPDX-License-Identifier: MIT
 * Check macros: convert foreign error conventions (syscalls, CUDA, verbs) into ncclResult_t at the
 * call site, log once where the error is first seen, and unwind with goto. */
#ifndef PCL_CHECK_H
#define PCL_CHECK_H

#include <errno.h>
#include <string.h>
#include <nccl.h>
#include "log.h"

/* Propagate an ncclResult_t; the callee already logged the cause, we add the location at INFO. */
#define PCL_CHECK(call)                                                                            \
  do {                                                                                             \
    ncclResult_t pcl_res_ = (call);                                                                \
    if (pcl_res_ != ncclSuccess && pcl_res_ != ncclInProgress) {                                   \
      PCL_INFO(PCL_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (int)pcl_res_);                     \
      return pcl_res_;                                                                             \
    }                                                                                              \
  } while (0)

/* Propagate an ncclResult_t without a log line: for code whose callee recorded the reason where
 * it was found (the plan loader's "file: json.path: reason"), so one more line adds nothing. */
#define PCL_TRY(call)                                                                              \
  do {                                                                                             \
    ncclResult_t pcl_res_ = (call);                                                                \
    if (pcl_res_ != ncclSuccess)                                                                   \
      return pcl_res_;                                                                             \
  } while (0)

#define PCL_CHECK_GOTO(call, res, label)                                                           \
  do {                                                                                             \
    (res) = (call);                                                                                \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                                         \
      PCL_INFO(PCL_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (int)(res));                        \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

/* A syscall that returns -1 and sets errno. */
#define PCL_SYS_CHECK(call, name)                                                                  \
  do {                                                                                             \
    if ((call) == -1) {                                                                            \
      PCL_WARN(PCL_LOG_ALL, "%s failed: %s", name, strerror(errno));                               \
      return ncclSystemError;                                                                      \
    }                                                                                              \
  } while (0)

#define PCL_SYS_CHECK_GOTO(call, name, res, label)                                                 \
  do {                                                                                             \
    if ((call) == -1) {                                                                            \
      PCL_WARN(PCL_LOG_ALL, "%s failed: %s", name, strerror(errno));                               \
      (res) = ncclSystemError;                                                                     \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

/* A NULL-returning allocation or lookup. */
#define PCL_PTR_CHECK_GOTO(ptr, what, res, label)                                                  \
  do {                                                                                             \
    if ((ptr) == NULL) {                                                                           \
      PCL_WARN(PCL_LOG_ALL, "out of memory allocating %s", what);                                  \
      (res) = ncclSystemError;                                                                     \
      goto label;                                                                                  \
    }                                                                                              \
  } while (0)

#endif
