/* SPDX-License-Identifier: MIT
 * ncclGroupStart/End/SimulateEnd. There is ONE group depth: the real library's. planccl forwards
 * every Start/End to it and keeps a thread-local mirror, so an ncclGroupEnd without a Start is
 * refused here exactly as NCCL refuses it, without reaching the real library. */
#include "log.h"
#include "shim_int.h"

static _Thread_local int depth;

int pcl_group_depth(void) {
  return depth;
}

/* A real library that is not deep-bound may call its own ncclGroupStart/End: those are its
 * internal groups, forwarded without touching the caller-visible depth. */
PCL_API ncclResult_t ncclGroupStart(void) {
  PCL_NEED_REAL(ncclGroupStart);
  if (pcl_fallback_called_by_real(PCL_CALLER)) return F->ncclGroupStart();
  ncclResult_t res = pcl_errors_real_result(F->ncclGroupStart());
  if (res == ncclSuccess) depth++;
  return res;
}
PCL_ALIAS(ncclGroupStart)

/* The real ncclGroupEnd decrements its depth before doing anything that can fail, so ours
 * follows it whatever it returns. */
static ncclResult_t group_end(const char *fn, int simulate, ncclSimInfo_t *sim,
                              const void *caller) {
  if (pcl_fallback_called_by_real(caller)) {
    const struct pcl_nccl_fns *F = pcl_fallback_fns();
    return simulate ? F->ncclGroupSimulateEnd(sim) : F->ncclGroupEnd();
  }
  if (depth == 0) {
    PCL_WARN(PCL_LOG_SHIM, "ncclGroupEnd: not in a group call.");
    return ncclInvalidUsage;
  }
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL) return pcl_fallback_none(fn);
  if ((simulate ? (void *)F->ncclGroupSimulateEnd : (void *)F->ncclGroupEnd) == NULL)
    return pcl_fallback_missing(fn);
  depth--;
  return pcl_errors_real_result(simulate ? F->ncclGroupSimulateEnd(sim) : F->ncclGroupEnd());
}

PCL_API ncclResult_t ncclGroupEnd(void) {
  return group_end("ncclGroupEnd", 0, NULL, PCL_CALLER);
}
PCL_ALIAS(ncclGroupEnd)

PCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  return group_end("ncclGroupSimulateEnd", 1, simInfo, PCL_CALLER);
}
PCL_ALIAS(ncclGroupSimulateEnd)
