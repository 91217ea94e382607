/* SPDX-License-Identifier: MIT
 * Version, error strings and the last-error text. ncclGetLastError reports the newest of two
 * sources: planccl's last WARN, or the real library's last error. A forwarded call that fails
 * snapshots planccl's current WARN text; while that text is unchanged the real library's message
 * is the newer one, and as soon as planccl logs a different WARN, planccl's is. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "shim_int.h"

#define TEXT_BYTES 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int real_failed;                   /* a forwarded call has failed at least once */
static char pcl_text_at_real[TEXT_BYTES]; /* planccl's WARN text when that happened */

ncclResult_t pcl_errors_real_result(ncclResult_t res) {
  if (res == ncclSuccess || res == ncclInProgress)
    return res;
  const char *now = pcl_log_last_error();
  pthread_mutex_lock(&lock);
  real_failed = 1;
  snprintf(pcl_text_at_real, sizeof(pcl_text_at_real), "%s", now);
  pthread_mutex_unlock(&lock);
  return res;
}

PCL_API const char *ncclGetErrorString(ncclResult_t result) {
  /* NCCL 2.30.3's new code, as the 2.32.6 library words it; compared as an int because an older
   * nccl.h has no enumerator for it. */
  if ((int)result == PCL_NCCL_TIMEOUT)
    return "timeout";
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}
PCL_ALIAS(ncclGetErrorString)

PCL_API const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;                              /* NCCL ignores it too: the text is process-wide */
  const char *mine = pcl_log_last_error(); /* thread-local copy, stable for this thread */
  pthread_mutex_lock(&lock);
  int real_newer = real_failed && strcmp(mine, pcl_text_at_real) == 0;
  pthread_mutex_unlock(&lock);
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if ((real_newer || mine[0] == '\0') && F != NULL && F->ncclGetLastError != NULL) {
    const char *theirs = F->ncclGetLastError(NULL);
    if (theirs != NULL && theirs[0] != '\0')
      return theirs;
  }
  return mine;
}
PCL_ALIAS(ncclGetLastError)

PCL_API ncclResult_t ncclGetVersion(int *version) {
  if (version == NULL) {
    PCL_WARN(PCL_LOG_SHIM, "ncclGetVersion: version argument is NULL");
    return ncclInvalidArgument;
  }
  int v = pcl_fallback_version();
  /* The real library's code, since real NCCL exchanges this value between ranks at init. */
  *version = v > 0 ? v : NCCL_VERSION_CODE;
  return ncclSuccess;
}
PCL_ALIAS(ncclGetVersion)

__attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) {
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F != NULL && F->ncclResetDebugInitInternal != NULL)
    F->ncclResetDebugInitInternal();
}

/* Deprecated in nccl.h; still exported by NCCL, so by us. From 2.30.3 on, nccl.h makes it an
 * empty macro unless NCCL_OS_LINUX is defined: the exported function is still wanted. */
#ifdef ncclResetDebugInit
#undef ncclResetDebugInit
#undef pncclResetDebugInit
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PCL_API void ncclResetDebugInit(void) {
  ncclResetDebugInitInternal();
}
PCL_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop
